// Package load runs the real function binary over mTLS on loopback and
// sends it many concurrent RunFunction calls of both kinds, as Crossplane
// does when it reconciles many composites at once.
package load

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/types/known/structpb"
	"sigs.k8s.io/yaml"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"

	"github.com/modelplaneai/function-inference-gateway/internal/gateway"
	"github.com/modelplaneai/function-inference-gateway/internal/names"
	"github.com/modelplaneai/function-inference-gateway/test/internal/toolchain"
)

// calls is how many RunFunction calls are in flight at once.
const calls = 1000

func TestLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the function twice and sends thousands of calls")
	}
	root, err := toolchain.Root()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certs := writeCerts(t, filepath.Join(dir, "server"), filepath.Join(dir, "client"))
	reqs := requests(t, root)

	for _, v := range []struct {
		name string
		race bool
	}{{"plain", false}, {"race", true}} {
		t.Run(v.name, func(t *testing.T) {
			bin := filepath.Join(dir, "function-"+v.name)
			args := []string{"build", "-o", bin}
			if v.race {
				// The race detector needs cgo.
				args = append(args, "-race")
			}
			cmd := exec.Command("go", append(args, "./cmd/function")...)
			cmd.Dir = root
			if v.race {
				cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
			}
			if b, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("cannot build the function: %v\n%s", err, b)
			}
			fn := start(t, bin, filepath.Join(dir, "server"))
			stats := fire(t, fn.addr, certs, reqs)
			rss := peakRSS(t, fn.cmd.Process.Pid)
			fn.stop(t)
			if strings.Contains(fn.out.String(), "DATA RACE") {
				t.Fatalf("the race detector reported a data race:\n%s", fn.out.String())
			}
			t.Logf("%s binary: %d concurrent calls (half InferenceGateway, half ModelRoute with 16 backends) in %v: %.0f calls/s, p50 %v, p99 %v, max %v, peak RSS %d MiB, 0 errors",
				v.name, calls, stats.wall.Round(time.Millisecond), float64(calls)/stats.wall.Seconds(),
				stats.p(50).Round(time.Microsecond), stats.p(99).Round(time.Microsecond), stats.p(100).Round(time.Microsecond), rss/1024)
		})
	}
}

// --- the function process ----------------------------------------------------

type process struct {
	cmd    *exec.Cmd
	addr   string
	out    *syncBuffer
	exited chan struct{}
}

func start(t *testing.T, bin, certDir string) *process {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	p := &process{addr: addr, out: &syncBuffer{}, exited: make(chan struct{})}
	p.cmd = exec.Command(bin, "--address="+addr, "--tls-certs-dir="+certDir)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("cannot start the function: %v", err)
	}
	go func() { _ = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() { p.stop(t) })
	for deadline := time.Now().Add(time.Minute); ; {
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			_ = c.Close()
			return p
		}
		select {
		case <-p.exited:
			t.Fatalf("cannot start the function: it exited:\n%s", p.out.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("cannot start the function: %s never accepted connections:\n%s", addr, p.out.String())
		}
	}
}

func (p *process) stop(t *testing.T) {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// peakRSS reads the process's peak resident set size, in KiB, from Linux's
// /proc.
func peakRSS(t *testing.T, pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Logf("cannot read peak RSS: %v", err)
		return 0
	}
	for l := range strings.SplitSeq(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmHWM:" {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	return 0
}

// --- the load ----------------------------------------------------------------

type stats struct {
	wall time.Duration
	lat  []time.Duration
}

func (s stats) p(q int) time.Duration {
	i := max((len(s.lat)*q)/100-1, 0)
	return s.lat[i]
}

// fire sends calls RunFunction calls at once over one mTLS connection,
// alternating the two kinds, and checks every response.
func fire(t *testing.T, addr string, creds credentials.TransportCredentials, reqs []expectation) stats {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := fnv1.NewFunctionRunnerServiceClient(conn)
	// One call first, so the handshake is not in the measurement.
	if _, err := client.RunFunction(t.Context(), reqs[0].req); err != nil {
		t.Fatalf("cannot call the function over mTLS: %v", err)
	}

	lat := make([]time.Duration, calls)
	errs := make([]error, calls)
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i := range calls {
		wg.Go(func() {
			e := reqs[i%len(reqs)]
			<-gate
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			t0 := time.Now()
			rsp, err := client.RunFunction(ctx, e.req)
			lat[i] = time.Since(t0)
			if err == nil {
				err = e.check(rsp)
			}
			errs[i] = err
		})
	}
	t0 := time.Now()
	close(gate)
	wg.Wait()
	s := stats{wall: time.Since(t0), lat: lat}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	slices.Sort(s.lat)
	return s
}

// expectation is a request and what its response must say.
type expectation struct {
	req       *fnv1.RunFunctionRequest
	condition string
	resources int
}

func (e expectation) check(rsp *fnv1.RunFunctionResponse) error {
	for _, r := range rsp.GetResults() {
		if r.GetSeverity() == fnv1.Severity_SEVERITY_FATAL {
			return fmt.Errorf("fatal: %s", r.GetMessage())
		}
	}
	if n := len(rsp.GetDesired().GetResources()); n != e.resources {
		return fmt.Errorf("want %d desired resources, got %d", e.resources, n)
	}
	for _, c := range rsp.GetConditions() {
		if c.GetType() == e.condition && c.GetStatus() == fnv1.Status_STATUS_CONDITION_TRUE {
			return nil
		}
	}
	return fmt.Errorf("want %s True, got %v", e.condition, rsp.GetConditions())
}

// requests builds one request of each kind from the examples: a rolled-out
// InferenceGateway, and a ready ModelRoute widened to 16 backends.
func requests(t *testing.T, root string) []expectation {
	t.Helper()
	ex := func(p string) []map[string]any { return docs(t, filepath.Join(root, "example", p)) }

	gw := &fnv1.RunFunctionRequest{
		Meta:     &fnv1.RequestMeta{Tag: "load-gateway"},
		Observed: &fnv1.State{Composite: &fnv1.Resource{Resource: st(t, ex("gateway/xr.yaml")[0])}, Resources: map[string]*fnv1.Resource{}},
	}
	for _, o := range ex("gateway/ready/observed.yaml") {
		gw.Observed.Resources[name(o)] = &fnv1.Resource{Resource: st(t, o)}
	}

	route := ex("route/xr.yaml")[0]
	routeName := route["metadata"].(map[string]any)["name"].(string)
	spec := route["spec"].(map[string]any)
	base := spec["backends"].([]any)
	var backends []any
	for i := range 16 {
		b := deepCopy(base[i%2]).(map[string]any)
		b["name"] = fmt.Sprintf("%s-%d", b["name"], i)
		b["priority"] = float64(i % 3)
		backends = append(backends, b)
	}
	spec["backends"] = backends
	rt := &fnv1.RunFunctionRequest{
		Meta:              &fnv1.RequestMeta{Tag: "load-route"},
		Observed:          &fnv1.State{Composite: &fnv1.Resource{Resource: st(t, route)}, Resources: map[string]*fnv1.Resource{}},
		RequiredResources: map[string]*fnv1.Resources{},
	}
	for _, o := range ex("route/ready/observed.yaml") {
		switch n := name(o); n {
		case "namespace", "route", "httproute":
			rt.Observed.Resources[n] = &fnv1.Resource{Resource: st(t, o)}
		default:
			// Every backend's Backend and AIServiceBackend exist on the
			// gateway cluster, and every keyed backend's key has reached it,
			// so each one is in the route: the example's Objects for vllm and
			// openrouter stand in for their copies.
			prefix, source, _ := strings.Cut(n, "-")
			for _, b := range backends {
				bm := b.(map[string]any)
				bn := bm["name"].(string)
				if !strings.HasPrefix(bn, source+"-") || prefix == "credential" && bm["apiKey"] == nil {
					continue
				}
				// A dashed backend name is one the function renamed; its
				// objects are composed under keys that end in ".v2"
				// (internal/route/names.go).
				key := prefix + "-" + bn
				if names.BackendRenamed(routeName, bn) {
					key += ".v2"
				}
				rt.Observed.Resources[key] = &fnv1.Resource{Resource: st(t, o)}
			}
		}
	}
	for _, r := range ex("route/ready/required.yaml") {
		key := "gateway"
		if r["kind"] == "Secret" {
			key = "secret-" + r["metadata"].(map[string]any)["name"].(string)
		}
		rt.RequiredResources[key] = &fnv1.Resources{Items: []*fnv1.Resource{{Resource: st(t, r)}}}
	}
	// 8 plain backends (Backend, AIServiceBackend), 8 with an API key (and a
	// Secret and a policy), the namespace, the route, the observed HTTPRoute
	// and gateway-status ConfigMap, and the sources ConfigMap that follows the
	// keys' resourceVersions.
	return []expectation{
		{req: gw, condition: "GatewayReady", resources: len(gateway.Resources)},
		{req: rt, condition: "RoutingReady", resources: 5 + 8*2 + 8*4},
	}
}

func docs(t *testing.T, path string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for d := range bytes.SplitSeq(b, []byte("\n---")) {
		m := map[string]any{}
		if err := yaml.Unmarshal(d, &m); err != nil {
			t.Fatalf("cannot parse %s: %v", path, err)
		}
		if len(m) > 0 {
			out = append(out, m)
		}
	}
	return out
}

func name(o map[string]any) string {
	return o["metadata"].(map[string]any)["annotations"].(map[string]any)["crossplane.io/composition-resource-name"].(string)
}

func st(t *testing.T, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func deepCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			out[k] = deepCopy(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = deepCopy(e)
		}
		return out
	}
	return v
}

// --- certificates --------------------------------------------------------------

// writeCerts makes a test CA, a server certificate for 127.0.0.1 written
// where the function reads it (ca.crt, tls.crt, tls.key), and a client
// certificate, and returns the client's credentials. A client without a
// certificate from the CA is refused.
func writeCerts(t *testing.T, serverDir, clientDir string) credentials.TransportCredentials {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "load-test-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	leaf := func(dir, cn string, usage x509.ExtKeyUsage, serial int64) tls.Certificate {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kb, _ := x509.MarshalECPrivateKey(key)
		certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
		keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		for n, b := range map[string][]byte{
			"ca.crt":  pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
			"tls.crt": certPEM, "tls.key": keyPEM,
		} {
			if err := os.WriteFile(filepath.Join(dir, n), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		c, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	leaf(serverDir, "function-inference-gateway", x509.ExtKeyUsageServerAuth, 2)
	client := leaf(clientDir, "crossplane", x509.ExtKeyUsageClientAuth, 3)
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{client}, RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12})
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
