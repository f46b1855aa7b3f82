package harness

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"time"
)

// AuditEvent is the part of a kube-apiserver audit event (audit.k8s.io/v1
// Event) the suite reads.
type AuditEvent struct {
	Stage      string `json:"stage"`      // the event's stage, e.g. ResponseComplete
	Verb       string `json:"verb"`       // the request's verb: get, create, patch...
	RequestURI string `json:"requestURI"` // the request's path and query
	// User is who made the request.
	User struct {
		Username string `json:"username"`
	} `json:"user"`
	// ObjectRef is the object the request was about, if any.
	ObjectRef *struct {
		Resource string `json:"resource"`
		Name     string `json:"name"`
	} `json:"objectRef"`
	// ResponseStatus is the status the API server answered with.
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestReceivedTimestamp time.Time `json:"requestReceivedTimestamp"` // when the API server received the request
	StageTimestamp           time.Time `json:"stageTimestamp"`           // when the event's stage was reached
}

// writeVerbs are the audit verbs that change an object.
var writeVerbs = []string{"create", "update", "patch", "delete"}

// NamespaceWrites returns the completed, successful, non-dry-run writes of
// the namespace name in the API server's audit log, in the order the API
// server received them. Reads are logged too, and are left out. The log is
// not in that order: the API server logs a request's ResponseComplete
// event after it has written the response (k8s.io/apiserver
// endpoints/filters/audit.go, WithAudit), so a reader's GET that the
// response made possible can be logged before the write it saw.
func (c *Cluster) NamespaceWrites(name string) ([]AuditEvent, error) {
	b, err := os.ReadFile(c.auditLog)
	if err != nil {
		return nil, fmt.Errorf("cannot read the audit log: %w", err)
	}
	var out []AuditEvent
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		var e AuditEvent
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
