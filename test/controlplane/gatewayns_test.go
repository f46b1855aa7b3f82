package controlplane

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// auditEvent is the part of a kube-apiserver audit event (audit.k8s.io/v1
// Event) the suite reads.
type auditEvent struct {
	Stage      string `json:"stage"`
	Verb       string `json:"verb"`
	RequestURI string `json:"requestURI"`
	User       struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource string `json:"resource"`
		Name     string `json:"name"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestReceivedTimestamp time.Time `json:"requestReceivedTimestamp"`
	StageTimestamp           time.Time `json:"stageTimestamp"`
}

// writeVerbs are the audit verbs that change an object.
var writeVerbs = []string{"create", "update", "patch", "delete"}

// namespaceWrites returns the completed, successful, non-dry-run writes of
// the namespace name in the API server's audit log, in the order the API
// server received them. Reads are logged too, and are left out. The log is
// not in that order: the API server logs a request's ResponseComplete
// event after it has written the response (k8s.io/apiserver
// endpoints/filters/audit.go, WithAudit), so a reader's GET that the
// response made possible can be logged before the write it saw.
func (c *cluster) namespaceWrites(name string) ([]auditEvent, error) {
	b, err := os.ReadFile(c.auditLog)
	if err != nil {
		return nil, fmt.Errorf("cannot read the audit log: %w", err)
	}
	var out []auditEvent
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		var e auditEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			continue // a line being written
		}
		if e.Stage != "ResponseComplete" || !slices.Contains(writeVerbs, e.Verb) || e.ObjectRef == nil || e.ObjectRef.Resource != "namespaces" || e.ObjectRef.Name != name ||
			e.ResponseStatus == nil || e.ResponseStatus.Code/100 != 2 || strings.Contains(e.RequestURI, "dryRun=") {
			continue
		}
		out = append(out, e)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].RequestReceivedTimestamp.Before(out[j].RequestReceivedTimestamp) })
	return out, nil
}

// gatewayNamespaceByProvider requires the gateway namespace to come into
// being through the function's gateway-namespace Object: that Object,
// composed for the InferenceGateway in objectNS, names the namespace and
// never deletes it (managementPolicies Observe, Create, Update), and the
// first write of the namespace the API server audited created it (201),
// as provider-kubernetes' gateway identity, with a server-side apply whose
// field manager is that Object's (provider-kubernetes v1.4.1 and v1.3.1
// syncer.go, SyncResource: provider-kubernetes/<Object name>).
func (sc *scenarios) gatewayNamespaceByProvider(t *testing.T) {
	t.Helper()
	var obj *unstructured.Unstructured
	var writes []auditEvent
	sc.eventually(t, waitSettle, "the gateway namespace, created by provider-kubernetes", func(ctx context.Context) string {
		obj = sc.composedObject(ctx, objectNS, gatewayXRName, resourceGatewayNamespace)
		if obj == nil {
			return fmt.Sprintf("no %s Object of the InferenceGateway in %s", resourceGatewayNamespace, objectNS)
		}
		if _, err := sc.get(ctx, gvrNamespace, "", gatewayNS); err != nil {
			return err.Error()
		}
		var err error
		if writes, err = sc.c.namespaceWrites(gatewayNS); err != nil {
			return err.Error()
		}
		if len(writes) == 0 {
			return "no write of the namespace in the audit log yet"
		}
		return ""
	})
	kind, _, _ := unstructured.NestedString(obj.Object, "spec", "forProvider", "manifest", "kind")
	name, _, _ := unstructured.NestedString(obj.Object, "spec", "forProvider", "manifest", "metadata", "name")
	if kind != "Namespace" || name != gatewayNS {
		t.Errorf("the %s Object manages %s %q, want Namespace %q", resourceGatewayNamespace, kind, name, gatewayNS)
	}
	policies, _, _ := unstructured.NestedStringSlice(obj.Object, "spec", "managementPolicies")
	sort.Strings(policies)
	if want := []string{"Create", "Observe", "Update"}; !slices.Equal(policies, want) {
		t.Errorf("the %s Object's managementPolicies are %v, want %v: the namespace is never deleted", resourceGatewayNamespace, policies, want)
	}
	first := writes[0]
	manager := "provider-kubernetes/" + obj.GetName()
	if first.ResponseStatus.Code != 201 || first.User.Username != sc.c.gatewayUser ||
		!strings.Contains(first.RequestURI, "fieldManager="+url.QueryEscape(manager)) {
		t.Errorf("the gateway namespace %s was first written by %s %s (%d) as %s, want created (201) by a server-side apply of %s as %s",
			gatewayNS, first.Verb, first.RequestURI, first.ResponseStatus.Code, first.User.Username, manager, sc.c.gatewayUser)
	}
	t.Logf("the gateway namespace %s was created %.2fs after the InferenceGateway by %s %s as %s",
		gatewayNS, first.StageTimestamp.Sub(sc.t0).Seconds(), first.Verb, first.RequestURI, first.User.Username)
}
