// Package harness starts, stops and reads the control plane the
// control-plane suite (test/controlplane) runs its scenarios on.
//
// It builds and caches every binary under bin/controlplane at the
// repository root (build.go: etcd, kube-apiserver, kube-controller-manager,
// Crossplane, provider-kubernetes, Envoy Gateway, AI Gateway; cert-manager
// in certmanager.go, the rate-limit service in ratelimit.go, the suite's
// xDS reader in xds.go), starts them as
// processes on loopback (procs.go; Envoy Gateway and AI Gateway each in a
// network and mount namespace of its own, isolate.go), and brings up the
// cluster with its clients (cluster.go), the CRDs, Crossplane, the provider,
// the function and the examples (install.go), the real upstream controllers
// (upstream.go) and the stand-ins for what has no binary here (standins.go).
//
// World (observe.go) watches the API server for the whole test: it keeps the
// timeline, the XRs' condition transitions and every deletion, and checks
// the invariants on every event — the envoy-deployment Object's Ready
// against the function's rollout rule, no API key in an Object (secrets.go), the
// sidecar invariant (sidecar.go), conditions Crossplane replays from its
// cache (replay.go) and its circuit breaker (breaker.go). The rest reads
// what the processes report: request rates and the audit log (speed.go,
// audit.go), the function's calls (reconciles.go), CPU time (cpu.go).
//
// The scenarios themselves are in the controlplane package's test files,
// one file per scenario of TestControlPlane.
package harness
