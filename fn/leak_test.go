package fn

import (
	"encoding/base64"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/crossplane/function-sdk-go/logging"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
)

// minLeakLine is the shortest line of a multi-line secret that is searched
// on its own. A PEM body's lines are 64 base64 characters (RFC 7468), its
// last one shorter; a line this long cannot turn up by chance.
const minLeakLine = 16

// leakForms are the forms in which secret could stand in a response or a
// log line. The raw value alone is not enough: protojson and the loggers
// escape a newline as \n, so a multi-line PEM key never appears there as
// it is; each line of its body does, and so do its JSON- and Go-quoted
// forms and its base64.
func leakForms(secret string) []string {
	forms := map[string]bool{secret: true, base64.StdEncoding.EncodeToString([]byte(secret)): true}
	if b, err := json.Marshal(secret); err == nil {
		forms[strings.Trim(string(b), `"`)] = true
	}
	forms[strings.Trim(strconv.Quote(secret), `"`)] = true
	for l := range strings.SplitSeq(secret, "\n") {
		l = strings.TrimSpace(l)
		if len(l) >= minLeakLine && !strings.HasPrefix(l, "-----") {
			forms[l] = true
		}
	}
	out := make([]string, 0, len(forms))
	for f := range forms {
		if f != "" {
			out = append(out, f)
		}
	}
	return out
}

// leaked is how many of secrets stand in text in any of their leakForms.
func leaked(text string, secrets []string) int {
	n := 0
	for _, s := range secrets {
		for _, f := range leakForms(s) {
			if strings.Contains(text, f) {
				n++
				break
			}
		}
	}
	return n
}

// TestLeakFinder shows that the search noLeak makes finds a key wherever
// the function could put one by mistake: in a condition's message, a
// result, or a log line, each as protojson or the logger writes it. The
// multi-line PEM key is the case a search for the raw value misses.
func TestLeakFinder(t *testing.T) {
	_, pemKey := tlsPair(t)
	key := string(pemKey)
	const callerKey = "sk-alice-0123456789abcdef"
	msg := func(s string) *string { return &s }
	inCondition := func(s string) string {
		return marshal(t, &fnv1.RunFunctionResponse{Conditions: []*fnv1.Condition{{Type: "GatewayReady", Reason: "X", Message: msg("bad key " + s)}}})
	}
	inResult := func(s string) string {
		return marshal(t, &fnv1.RunFunctionResponse{Results: []*fnv1.Result{{Severity: fnv1.Severity_SEVERITY_WARNING, Message: "cannot use " + s}}})
	}
	inLog := func(s string) string {
		var b strings.Builder
		log := logging.NewLogrLogger(funcr.New(func(prefix, args string) { b.WriteString(prefix + args + "\n") }, funcr.Options{Verbosity: 10}))
		log.Debug("observed", "secret", s)
		return b.String()
	}
	cases := map[string]struct {
		text    string
		secrets []string
		want    int
	}{
		"PEMKeyInConditionMessage":      {text: inCondition(key), secrets: []string{key}, want: 1},
		"PEMKeyInResult":                {text: inResult(key), secrets: []string{key}, want: 1},
		"PEMKeyInLogLine":               {text: inLog(key), secrets: []string{key}, want: 1},
		"PEMKeyBase64InCondition":       {text: inCondition(base64.StdEncoding.EncodeToString(pemKey)), secrets: []string{key}, want: 1},
		"OneLineOfPEMBodyInLog":         {text: inLog(strings.Split(key, "\n")[1]), secrets: []string{key}, want: 1},
		"CallerKeyInConditionMessage":   {text: inCondition(callerKey), secrets: []string{callerKey}, want: 1},
		"CallerKeyInLogLine":            {text: inLog(callerKey), secrets: []string{key, callerKey}, want: 1},
		"NothingSecretInConditionOrLog": {text: inCondition("the key is missing") + inLog("no key"), secrets: []string{key, callerKey}, want: 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, leaked(tc.text, tc.secrets)); diff != "" {
				t.Errorf("leaked(...): -want, +got:\n%s\ntext: %s", diff, tc.text)
			}
		})
	}
	// The search noLeak made before: the raw PEM key, which protojson and
	// the logger never write as it is.
	for _, where := range []string{inCondition(key), inLog(key)} {
		if strings.Contains(where, key) {
			t.Errorf("the raw multi-line key was found as it is; the escaped forms would not be needed: %s", where)
		}
	}
}

func marshal(t *testing.T, rsp *fnv1.RunFunctionResponse) string {
	t.Helper()
	b, err := protojson.Marshal(rsp)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
