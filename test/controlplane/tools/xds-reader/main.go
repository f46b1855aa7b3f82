// Command xds-reader reads the configuration Envoy Gateway serves to the
// Envoy of one Gateway, as that Envoy would, and prints it as one JSON
// object: listeners, routes, clusters, endpoints and secrets, each a list
// of resources in protojson with their @type. Every key and secret value
// is replaced by "<redacted>" before it is printed.
//
// With -ratelimit-config it reads instead what Envoy Gateway serves the
// global rate-limit service; with -should-rate-limit it asks a running
// rate-limit service as Envoy's rate-limit filter would (ratelimit.go).
//
// The control-plane suite runs it against the real Envoy Gateway to check
// the promises the function makes, which only Envoy carries out.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// kind is an output key and the type it holds.
type kind struct{ key, typeURL string }

// envoyKinds are what an Envoy is served, in the order they are asked for.
// Clusters go first: Envoy Gateway's first answer on a stream waits for a
// snapshot of the node's Gateway, and every other type follows from it.
var envoyKinds = []kind{
	{"clusters", resourcev3.ClusterType},
	{"listeners", resourcev3.ListenerType},
	{"routes", resourcev3.RouteType},
	{"endpoints", resourcev3.EndpointType},
	{"secrets", resourcev3.SecretType},
}

// rateLimitKinds are what the rate-limit service is served: its
// configuration, one RateLimitConfig per domain, from Envoy Gateway's
// second xDS server (gateway v1.8.3 internal/globalratelimit/runner/
// runner.go), keyed by node ID alone (cachev3.IDHash).
var rateLimitKinds = []kind{
	{"ratelimit_configs", resourcev3.RateLimitConfigType},
}

func main() {
	var (
		addr    = flag.String("address", "127.0.0.1:18000", "Envoy Gateway's xDS server")
		certDir = flag.String("cert-dir", "", "a folder with ca.crt, tls.crt and tls.key: a client certificate Envoy Gateway trusts (its certgen Secret envoy-gateway-system/envoy)")
		server  = flag.String("server-name", "envoy-gateway", "the name in Envoy Gateway's server certificate")
		cluster = flag.String("node-cluster", "", "the infra IR key of the Gateway, <namespace>/<name>: what Envoy Gateway passes to its Envoy as --service-cluster")
		nodeID  = flag.String("node-id", "", "the node ID; any unique non-empty string")
		timeout = flag.Duration("timeout", 30*time.Second, "how long to wait for a snapshot")
		others  = flag.Duration("others-timeout", 2*time.Second, "how long to wait, once the clusters came, for the other types (a type the snapshot lacks may never be answered)")
		rlConf  = flag.Bool("ratelimit-config", false, "read the rate-limit service's configuration instead (Envoy Gateway's port 18001, node ID envoy-ratelimit)")
		should  = flag.Bool("should-rate-limit", false, "call the rate-limit service at -address with each ShouldRateLimitRequest of the JSON array on stdin, in order, and print the answers")
		extProc = flag.Bool("ext-proc", false, "play Envoy for the one request on stdin through AI Gateway's router and upstream ext_proc filters, served at -address, and print their answers and the request as it would go upstream")
	)
	flag.Parse()
	if *extProc {
		if err := callExtProc(*addr, *timeout, os.Stdin, os.Stdout); err != nil {
			fmt.Fprintf(os.Stderr, "xds-reader: %v\n", err)
			os.Exit(1)
		}
		return
	}
	if *should {
		if err := shouldRateLimit(*addr, *certDir, *server, *timeout, os.Stdin, os.Stdout); err != nil {
			fmt.Fprintf(os.Stderr, "xds-reader: %v\n", err)
			os.Exit(1)
		}
		return
	}
	kinds := envoyKinds
	if *rlConf {
		kinds = rateLimitKinds
	}
	if *certDir == "" || *nodeID == "" || (*cluster == "" && !*rlConf) {
		fmt.Fprintln(os.Stderr, "xds-reader: -cert-dir and -node-id are required, and -node-cluster for an Envoy's configuration")
		os.Exit(2)
	}
	// However it waits, the reader never outlives its timeout by more than
	// a few seconds, and says where it waited: a reader that overstays
	// would otherwise only be killed by its caller, without a word.
	watchdog := time.AfterFunc(*timeout+5*time.Second, func() {
		buf := make([]byte, 1<<20)
		fmt.Fprintf(os.Stderr, "xds-reader: still running 5s past -timeout %s; its goroutines:\n%s\n", *timeout, buf[:runtime.Stack(buf, true)])
		os.Exit(3)
	})
	defer watchdog.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	out, err := read(ctx, *addr, *certDir, *server, &corev3.Node{Id: *nodeID, Cluster: *cluster}, kinds, *others)
	if err != nil {
		fmt.Fprintf(os.Stderr, "xds-reader: %v\n", err)
		os.Exit(1)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		fmt.Fprintf(os.Stderr, "xds-reader: cannot write the dump: %v\n", err)
		os.Exit(1)
	}
}

// dialTLS is mutual TLS 1.3 as Envoy Gateway's xDS server wants it: a
// client certificate signed by its CA, whose name it does not check
// (gateway v1.8.1 internal/crypto/cert_load.go, LoadTLSConfig).
func dialTLS(certDir, server string) (credentials.TransportCredentials, error) {
	cert, err := tls.LoadX509KeyPair(certDir+"/tls.crt", certDir+"/tls.key")
	if err != nil {
		return nil, fmt.Errorf("cannot load the client certificate from %s: %w", certDir, err)
	}
	ca, err := os.ReadFile(certDir + "/ca.crt")
	if err != nil {
		return nil, fmt.Errorf("cannot read the CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, errors.New("cannot parse the CA in ca.crt")
	}
	return credentials.NewTLS(&tls.Config{
		Certificates: []tls.Certificate{cert},
		RootCAs:      pool,
		ServerName:   server,
		MinVersion:   tls.VersionTLS13,
	}), nil
}

// read opens one delta ADS stream, as Envoy's bootstrap does, and asks for
// each type. A state-of-the-world stream never answers a type the snapshot
// lacks, and a Gateway whose backends are all DNS clusters has no EDS
// resources. Envoy Gateway publishes a new snapshot on every translation,
// so the types of one read may come from two snapshots: the versions are in
// the dump, and the suite's checks wait on the content.
func read(ctx context.Context, addr, certDir, server string, node *corev3.Node, kinds []kind, others time.Duration) (map[string]any, error) {
	creds, err := dialTLS(certDir, server)
	if err != nil {
		return nil, err
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds),
		// A large gateway's listeners and routes exceed gRPC's 4 MiB default.
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(256<<20)))
	if err != nil {
		return nil, fmt.Errorf("cannot dial %s: %w", addr, err)
	}
	defer conn.Close() //nolint:errcheck // nothing to do about it
	out, _, err := readOnce(ctx, conn, node, kinds, others)
	return out, err
}

// readOnce reads every type on one stream, and reports whether every
// answer had the same version.
func readOnce(ctx context.Context, conn *grpc.ClientConn, node *corev3.Node, kinds []kind, others time.Duration) (map[string]any, bool, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).DeltaAggregatedResources(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("cannot open a delta ADS stream: %w", err)
	}
	answers := make(chan *discoveryv3.DeltaDiscoveryResponse)
	failed := make(chan error, 1)
	go func() {
		for {
			r, err := stream.Recv()
			if err != nil {
				failed <- err
				return
			}
			select {
			case answers <- r:
			case <-ctx.Done():
				return
			}
		}
	}()
	ask := func(typeURL string) error {
		// No names: a wildcard subscription, all resources of the type.
		return stream.Send(&discoveryv3.DeltaDiscoveryRequest{Node: node, TypeUrl: typeURL})
	}

	got := map[string]*discoveryv3.DeltaDiscoveryResponse{}
	if err := ask(kinds[0].typeURL); err != nil {
		return nil, false, fmt.Errorf("cannot ask for %s: %w", kinds[0].key, err)
	}
	var deadline <-chan time.Time
	for len(got) < len(kinds) {
		select {
		case <-ctx.Done():
			if len(got) == 0 {
				return nil, false, fmt.Errorf("no snapshot for node cluster %q: %w (a wrong node cluster, or no translation of the Gateway yet)", node.GetCluster(), ctx.Err())
			}
			return nil, false, ctx.Err()
		case err := <-failed:
			return nil, false, fmt.Errorf("the stream failed: %w", err)
		case <-deadline:
			// The other types have had their time; what has not come, the
			// snapshot lacks.
			return decodeAll(kinds, got)
		case r := <-answers:
			// What came, on stderr, for a reader that waits in vain.
			fmt.Fprintf(os.Stderr, "xds-reader: %s version %q: %d resources\n", r.GetTypeUrl(), r.GetSystemVersionInfo(), len(r.GetResources()))
			if _, seen := got[r.GetTypeUrl()]; !seen {
				got[r.GetTypeUrl()] = r
			}
			if r.GetTypeUrl() == kinds[0].typeURL && deadline == nil {
				for _, k := range kinds[1:] {
					if err := ask(k.typeURL); err != nil {
						return nil, false, fmt.Errorf("cannot ask for %s: %w", k.key, err)
					}
				}
				deadline = time.After(others)
			}
		}
	}
	return decodeAll(kinds, got)
}

// decodeAll decodes the answers by type, redacted, and reports whether
// they are of one snapshot version.
func decodeAll(kinds []kind, got map[string]*discoveryv3.DeltaDiscoveryResponse) (map[string]any, bool, error) {
	out := map[string]any{}
	versions := map[string]string{}
	version := ""
	stable := true
	missing := []string{}
	for _, k := range kinds {
		r, ok := got[k.typeURL]
		if !ok {
			missing = append(missing, k.key)
			out[k.key] = []any{}
			continue
		}
		// A type the snapshot lacks answers with no version.
		v := r.GetSystemVersionInfo()
		versions[k.key] = v
		switch {
		case v == "":
		case version == "":
			version = v
		case v != version:
			stable = false
		}
		list := make([]any, 0, len(r.GetResources()))
		for _, res := range r.GetResources() {
			v, err := toJSON(res.GetResource())
			if err != nil {
				return nil, false, fmt.Errorf("cannot decode a %s resource %q: %w", k.key, res.GetName(), err)
			}
			list = append(list, redact(v))
		}
		out[k.key] = list
	}
	out["versions"] = versions
	out["one_snapshot"] = stable
	if len(missing) > 0 {
		out["unanswered"] = missing
	}
	return out, stable, nil
}
