// Package rollout holds the one rule that says whether the Envoy Deployment
// has finished rolling out the ext-proc sidecar. The rule is a CEL string:
// provider-kubernetes evaluates it as the observe-only Object's celQuery, and
// this function evaluates the very same string on the Deployment it reads
// from that Object's status, so the two can never disagree.
package rollout

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/google/cel-go/cel"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/crossplane/function-sdk-go/errors"
)

// Check is one clause of the rollout rule. Its name is the reason the
// gateway reports when the clause does not hold.
type Check string

// The clauses of the rollout rule, in the order they are reported.
const (
	// GenerationNotObserved: the Deployment controller has not yet observed
	// the latest change to the Deployment, so its counters are stale.
	GenerationNotObserved Check = "GenerationNotObserved"

	// ExtProcMarkerMissing: neither AI Gateway nor the function (its
	// VerifiedMarker) has put an ext-proc marker on the pod template yet,
	// so nothing shows that the template's pods have the sidecar.
	ExtProcMarkerMissing Check = "ExtProcMarkerMissing"

	// OldReplicasPresent: pods of an older template, which may lack the
	// sidecar and answer 500, still count towards status.replicas.
	OldReplicasPresent Check = "OldReplicasPresent"

	// NoReplicaAvailable: no pod is available to serve.
	NoReplicaAvailable Check = "NoReplicaAvailable"
)

// VerifiedMarker is the function's own ext-proc marker. AI Gateway
// v1.0.0 writes its marker (aigateway.envoyproxy.io/uuid) on the pod
// template only when the pods' sidecar state disagrees with whether a
// route is attached (ai-gateway v1.0.0 internal/controller/gateway.go,
// annotateGatewayPods: hasEffectiveRoute != hasSideCar || forceRollout).
// Envoy pods first created after its filter-config Secret exists already
// get the sidecar from its webhook, so it never writes one, and the rule
// would wait forever. The function then writes this key itself, through
// the EnvoyProxy's pod annotations, once it has observed evidence that
// every pod of the current template has the sidecar (package gatewayready,
// marker.go). It is one more accepted marker of ExtProcMarkerMissing,
// added by For whatever the Input lists, so the provider's celQuery and
// the function agree on it too. AI Gateway v1.1.0 writes its
// extproc-config-hash within seconds of a route attaching, so on v1.1.0
// the function never has to write this one.
const VerifiedMarker = "modelplane.ai/ext-proc-verified"

// Deployment JSON leaves zero-valued status counters out (omitempty), and
// provider-kubernetes v1.3 has no CEL optional types, so every field is read
// behind has() guards and every number is compared as a double: the
// provider round-trips the object through JSON into map[string]any
// (provider-kubernetes internal/controller/namespaced/object/object.go,
// checkDeriveFromCelQuery), which makes every number a float64.
const (
	hasStatus  = "has(object.status)"
	count      = "(has(object.status.%[1]s) ? object.status.%[1]s : 0.0)"
	templateMD = "has(object.spec) && has(object.spec.template) && has(object.spec.template.metadata) && has(object.spec.template.metadata.annotations)"
)

// clause is one named part of the rule.
type clause struct {
	check Check
	expr  string
}

func clauses(markers []string) []clause {
	anyMarker := make([]string, len(markers))
	for i, k := range markers {
		a := "object.spec.template.metadata.annotations"
		anyMarker[i] = fmt.Sprintf("('%s' in %s && %s['%s'] != '')", k, a, a, k)
	}
	return []clause{
		{GenerationNotObserved, hasStatus + " && has(object.status.observedGeneration) && has(object.metadata.generation) && object.status.observedGeneration >= object.metadata.generation"},
		{ExtProcMarkerMissing, templateMD + " && (" + strings.Join(anyMarker, " || ") + ")"},
		{OldReplicasPresent, hasStatus + " && " + fmt.Sprintf(count, "updatedReplicas") + " == " + fmt.Sprintf(count, "replicas")},
		{NoReplicaAvailable, hasStatus + " && has(object.status.availableReplicas) && object.status.availableReplicas >= 1.0"},
	}
}

// Rule is the compiled rollout rule for one set of marker annotations.
type Rule struct {
	// Expression is the CEL string that goes into the Object's celQuery.
	Expression string

	all    cel.Program
	checks []compiled
}

type compiled struct {
	check Check
	prg   cel.Program
}

// Verdict is what the rule says about one Deployment.
type Verdict struct {
	// Ready is the value of the whole expression.
	Ready bool

	// Failed lists the clauses that do not hold, in report order.
	Failed []Check
}

// NewEnv returns the CEL environment provider-kubernetes evaluates celQuery
// in: one variable, object, of any type. provider-kubernetes v1.4 adds
// optional types on top of it; the rule uses none, so it compiles in both.
func NewEnv(opts ...cel.EnvOption) (*cel.Env, error) {
	return cel.NewEnv(append([]cel.EnvOption{cel.Variable("object", cel.AnyType)}, opts...)...)
}

var (
	cacheMu sync.Mutex
	cache   = map[string]*Rule{}
)

// For returns the rule for the given marker annotation keys (the Input's
// extProcMarkerAnnotations) and VerifiedMarker, compiling it the first
// time these keys are seen and reusing it after that. A function serves
// one Input for its whole life in practice, so the cache stays tiny.
func For(markers []string) (*Rule, error) {
	key := strings.Join(markers, "\n")
	cacheMu.Lock()
	defer cacheMu.Unlock()
	if r, ok := cache[key]; ok {
		return r, nil
	}
	r, err := compile(markers)
	if err != nil {
		return nil, err
	}
	cache[key] = r
	return r, nil
}

// compile builds and compiles the rule without the cache. Use For.
func compile(markers []string) (*Rule, error) {
	if len(markers) == 0 {
		return nil, errors.New("cannot build the rollout rule: extProcMarkerAnnotations is empty; name at least one annotation key, such as aigateway.envoyproxy.io/extproc-config-hash")
	}
	for i, k := range markers {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return nil, errors.Errorf("cannot use extProcMarkerAnnotations[%d] %q: it is not an annotation key (%s)", i, k, strings.Join(errs, "; "))
		}
	}
	env, err := NewEnv()
	if err != nil {
		return nil, errors.Wrap(err, "cannot create the CEL environment")
	}
	if !slices.Contains(markers, VerifiedMarker) {
		markers = append(slices.Clone(markers), VerifiedMarker)
	}
	cs := clauses(markers)
	parts := make([]string, len(cs))
	r := &Rule{checks: make([]compiled, len(cs))}
	for i, c := range cs {
		parts[i] = "(" + c.expr + ")"
		prg, err := program(env, c.expr)
		if err != nil {
			return nil, errors.Wrapf(err, "cannot compile rollout check %s", c.check)
		}
		r.checks[i] = compiled{check: c.check, prg: prg}
	}
	r.Expression = strings.Join(parts, " && ")
	if r.all, err = program(env, r.Expression); err != nil {
		return nil, errors.Wrap(err, "cannot compile the rollout rule")
	}
	return r, nil
}

// program compiles expr and insists it returns a bool, as provider-kubernetes
// does ("celQuery does not return a bool type").
func program(env *cel.Env, expr string) (cel.Program, error) {
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		return nil, iss.Err()
	}
	if ast.OutputType() != cel.BoolType {
		return nil, errors.Errorf("expression returns %s, not bool", ast.OutputType())
	}
	return env.Program(ast)
}

// Evaluate runs the rule on a Deployment given as JSON-shaped data, the way
// provider-kubernetes sees it: numbers as float64.
func (r *Rule) Evaluate(deployment map[string]any) (Verdict, error) {
	act := map[string]any{"object": deployment}
	ready, err := evalBool(r.all, act)
	if err != nil {
		return Verdict{}, errors.Wrap(err, "cannot evaluate the rollout rule on the Envoy Deployment")
	}
	v := Verdict{Ready: ready}
	if ready {
		return v, nil
	}
	for _, c := range r.checks {
		ok, err := evalBool(c.prg, act)
		if err != nil {
			return Verdict{}, errors.Wrapf(err, "cannot evaluate rollout check %s on the Envoy Deployment", c.check)
		}
		if !ok {
			v.Failed = append(v.Failed, c.check)
		}
	}
	return v, nil
}

func evalBool(prg cel.Program, act map[string]any) (bool, error) {
	out, _, err := prg.Eval(act)
	if err != nil {
		return false, err
	}
	b, ok := out.Value().(bool)
	if !ok {
		return false, errors.Errorf("rule returned %T, not bool", out.Value())
	}
	return b, nil
}
