// Package compose holds the small, protobuf-free view a composer gets of one
// reconcile, and the plain result it returns. The fn package converts to and
// from gRPC types once, on each side.
package compose

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/modelplaneai/function-inference-gateway/internal/input/v1beta1"
	"github.com/modelplaneai/function-inference-gateway/internal/remote"
)

// Request is what a composer sees of one RunFunction call.
type Request struct {
	// Input is the function's Input with every default filled in.
	Input *v1beta1.Input

	// Composite is the observed composite resource, as JSON-shaped data.
	Composite map[string]any

	// Observed holds the observed composed resources by composition resource
	// name.
	Observed map[string]remote.Observed

	// Required holds the required resources Crossplane resolved, by
	// requirement name. A name that is absent has not been resolved yet.
	Required map[string][]map[string]any
	// Now is the time of this call, for readiness that depends on how long
	// something has lasted.
	Now time.Time
}

// Result is what a composer wants.
type Result struct {
	// Resources are the composed resources the composer built this time,
	// by composition resource name.
	Resources map[string]Desired

	// Implied names every composed resource the composite's spec implies,
	// whether or not it could be built this time. An observed resource that
	// is implied but was not built is carried forward from observed state,
	// so a missing input never deletes anything. Only a change to the spec,
	// which removes a name from this set, may remove a composed resource.
	Implied map[string]bool

	// Status marshals to a JSON object whose top-level fields are written
	// into the composite's status.
	Status any

	// Conditions to set on the composite.
	Conditions []Condition

	// Ready is the composite's readiness: false holds it not ready whatever
	// its composed resources say.
	Ready bool

	// Warnings become Warning results (and events). They must never carry a
	// secret value.
	Warnings []string
	// Notices become Normal results (and events): something the user
	// should know that is not a fault, such as a gateway left open to
	// every caller. They must never carry a secret value either.
	Notices []string

	// RequeueAfter, when not zero, is how soon the composite should be
	// reconciled again (the response TTL), whatever its readiness.
	RequeueAfter time.Duration
	// Requirements are the resources the composer needs Crossplane to fetch.
	// They are sent on every call, as Crossplane expects.
	Requirements map[string]Requirement

	// Evidence is what the verdict was judged from, as key-value pairs the
	// function logs at debug level with the reconcile, so that a verdict
	// can be traced to the inputs that reconcile read. Never a secret.
	Evidence []any
}

// Desired is one composed resource the composer built.
type Desired struct {
	// Object is a value that marshals to the resource's JSON, such as a
	// *remote.Object.
	Object any

	// Ready is true only when observed evidence shows the resource ready.
	Ready bool
}

// Condition is a status condition for the composite.
type Condition struct {
	Type    string
	Status  bool
	Reason  string
	Message string
}

// Requirement asks Crossplane for one resource by name, or, without a
// name, for every resource of the kind that carries MatchLabels (all of
// them when MatchLabels is empty).
type Requirement struct {
	APIVersion string
	Kind       string
	Name       string
	// MatchLabels selects by label when Name is empty.
	MatchLabels map[string]string
	// Namespace is empty for a cluster-scoped resource.
	Namespace string
}

// Composer composes one kind of composite.
type Composer interface {
	Compose(req Request) (*Result, error)
}

// Problems collects the failed checks behind one condition, in the order
// the user must act on them.
type Problems struct {
	reasons, messages []string
}

// Add records a failed check.
func (p *Problems) Add(reason, message string) {
	p.reasons = append(p.reasons, reason)
	p.messages = append(p.messages, message)
}

// Only reports whether reason is the one failed check.
func (p *Problems) Only(reason string) bool {
	return len(p.reasons) == 1 && p.reasons[0] == reason
}

// Leads reports whether reason is the first failed check: the one the
// condition reports.
func (p *Problems) Leads(reason string) bool {
	return len(p.reasons) > 0 && p.reasons[0] == reason
}

// None reports whether no check failed.
func (p *Problems) None() bool { return len(p.reasons) == 0 }

// Condition is True with okReason and okMessage when no check failed, and
// otherwise False with the first failed check's reason and every failed
// check in the message.
func (p *Problems) Condition(typ, okReason, okMessage string) Condition {
	if len(p.reasons) == 0 {
		return Condition{Type: typ, Status: true, Reason: okReason, Message: okMessage}
	}
	msg := p.messages[0]
	if len(p.messages) > 1 {
		msg += ". Also: " + strings.Join(p.messages[1:], "; ")
	}
	return Condition{Type: typ, Reason: p.reasons[0], Message: msg}
}

// ReasonSpecRefused is the reason of a composite's condition while the
// function refuses its spec (Refuse).
const ReasonSpecRefused = "SpecRefused"

// Refuse is the result for a composite whose spec the function refuses
// (refusal names the field, the value and the fix) after it has composed:
// it keeps serving. Every observed composed resource goes back exactly as
// observed (Implied, carried forward), the composite's status as observed,
// its condition of type typ False with reason SpecRefused and the
// refusal, and a Warning with the same text. ok is false when nothing was
// composed: there is nothing to keep, and the caller answers Fatal.
//
// A Fatal result would keep everything too, since Crossplane then applies
// and deletes nothing, but it leaves the condition Unknown (FatalError)
// with no word on the composite of what to fix, and, since a Fatal drops
// the TTL for Crossplane's error back-off, nobody that follows the
// composite hears of it (crossplane v2.3.0 internal/controller/
// apiextensions/composite/composition_functions.go, Compose returns the
// Fatal as an error; reconciler.go, Reconcile).
func Refuse(req Request, typ string, refusal error) (*Result, bool) {
	if len(req.Observed) == 0 {
		return nil, false
	}
	res := &Result{Resources: map[string]Desired{}, Implied: KeepObserved(req)}
	c := Condition{Type: typ, Reason: ReasonSpecRefused, Message: refusal.Error()}
	res.Conditions = []Condition{c}
	res.Warnings = []string{refusal.Error()}
	st := keptStatus(req.Composite)
	st["notReadySince"] = NotReadySince(req.Composite, c, req.Now, false)
	res.Status = st
	return res, true
}

// KeepObserved implies every observed composed resource but those named
// in drop: carried forward as observed, none deleted.
func KeepObserved(req Request, drop ...string) map[string]bool {
	out := make(map[string]bool, len(req.Observed))
	for n, o := range req.Observed {
		// crossplane render reads a YAML stream's leading comments as an
		// observed resource without a name or a body; Crossplane never
		// sends one.
		out[n] = n != "" && len(o.Object()) > 0 && !slices.Contains(drop, n)
	}
	return out
}

// keptStatus is the observed composite's status without its conditions,
// which the response sets: Crossplane applies the desired composite's
// status with server-side apply, the function the only owner of the fields
// it writes, so a field left out would be removed (composition_functions.go,
// FunctionComposer.Compose).
func keptStatus(xr map[string]any) map[string]any {
	st, _ := xr["status"].(map[string]any)
	out := make(map[string]any, len(st))
	for k, v := range st {
		if k != "conditions" {
			out[k] = v
		}
	}
	return out
}

// QuoteAll quotes each of ss and joins them with commas, for a message
// that names several objects.
func QuoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}
