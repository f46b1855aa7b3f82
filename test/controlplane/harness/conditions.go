package harness

import (
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Condition returns the condition of type typ in status.conditions, or nil.
func Condition(u *unstructured.Unstructured, typ string) map[string]any {
	if u == nil {
		return nil
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == typ {
			return m
		}
	}
	return nil
}

// ConditionStatus returns the status of the condition typ ("True",
// "False", "Unknown"), or "" when there is none.
func ConditionStatus(u *unstructured.Unstructured, typ string) string {
	s, _ := Condition(u, typ)["status"].(string)
	return s
}

// ConditionReason returns the reason of the condition typ, or "".
func ConditionReason(u *unstructured.Unstructured, typ string) string {
	s, _ := Condition(u, typ)["reason"].(string)
	return s
}

// ConditionsSummary renders every condition as type=status(reason).
func ConditionsSummary(u *unstructured.Unstructured) string {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	parts := make([]string, 0, len(conds))
	for _, c := range conds {
		m, _ := c.(map[string]any)
		parts = append(parts, fmt.Sprintf("%v=%v(%v: %v)", m["type"], m["status"], m["reason"], m["message"]))
	}
	return strings.Join(parts, ", ")
}

// SetCondition replaces the condition of the same type, or adds it.
func SetCondition(u *unstructured.Unstructured, c map[string]any) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	out := make([]any, 0, len(conds)+1)
	for _, x := range conds {
		if m, _ := x.(map[string]any); m["type"] == c["type"] {
			continue
		}
		out = append(out, x)
	}
	out = append(out, c)
	_ = unstructured.SetNestedSlice(u.Object, out, "status", "conditions")
}

// Int64At reads an integer field, which JSON decoding may have made an
// int64 or a float64. A missing field is 0, as Kubernetes omits zero
// counters.
func Int64At(obj map[string]any, path ...string) int64 {
	v, ok, _ := unstructured.NestedFieldNoCopy(obj, path...)
	if !ok {
		return 0
	}
	switch n := v.(type) {
	case int64:
		return n
	case float64:
		return int64(n)
	case int:
		return int64(n)
	case json.Number:
		i, _ := n.Int64()
		return i
	}
	return 0
}
