// Command cert-manager-controller runs cert-manager's own controllers, from
// its Go module, against the loopback control plane's gateway cluster.
//
// cert-manager's controller binary is a module of its own
// (github.com/cert-manager/cert-manager/controller-binary, cmd/controller in
// its repository) that the Go module proxy does not serve, and its start-up
// code imports the main module's internal packages. The controllers
// themselves are in the main module, which is served: each registers itself
// with pkg/controller.Register when its package is imported. This main does
// what cmd/controller/app.Run does for the controllers it needs (build one
// ContextFactory, construct every registered controller, run it, start the
// shared informers), and nothing else: no leader election, no metrics or
// healthz servers, no ACME, Vault or Venafi, no certificate-shim. The
// webhook is not run either: it validates and defaults, and the
// CertificateRequest approver below sets Approved=True on every request
// without it (pkg/controller/certificaterequests/approver).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/cert-manager/cert-manager/pkg/controller"

	// The controllers an Issuer or ClusterIssuer of type CA or SelfSigned
	// needs to issue and renew a Certificate (the list of
	// internal/apis/config/controller/v1alpha1 DefaultEnabledControllers,
	// without ACME, Vault, Venafi, the shims and metrics).
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	_ "github.com/cert-manager/cert-manager/pkg/controller/clusterissuers"
	_ "github.com/cert-manager/cert-manager/pkg/controller/issuers"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "the gateway cluster's kubeconfig")
	clusterNS := flag.String("cluster-resource-namespace", "cert-manager",
		"where a ClusterIssuer's Secrets are read from")
	workers := flag.Int("concurrent-workers", 5, "workers per controller, as cert-manager's default")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *kubeconfig, *clusterNS, *workers); err != nil {
		fmt.Fprintln(os.Stderr, "cert-manager-controller:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, kubeconfig, clusterNS string, workers int) error {
	factory, err := controller.NewContextFactory(ctx, controller.ContextOptions{
		Kubeconfig: kubeconfig,
		// cert-manager's defaults (cmd/controller/app/options).
		KubernetesAPIQPS:   20,
		KubernetesAPIBurst: 50,
		IssuerOptions:      controller.IssuerOptions{ClusterResourceNamespace: clusterNS},
		CertificateOptions: controller.CertificateOptions{
			CertificateRequestMinimumBackoffDuration: time.Hour,
			CertificateRequestMaximumBackoffDuration: 32 * time.Hour,
		},
	})
	if err != nil {
		return fmt.Errorf("cannot build the controller context: %w", err)
	}
	base, err := factory.Build()
	if err != nil {
		return fmt.Errorf("cannot build the base controller context: %w", err)
	}

	g, ctx := errgroup.WithContext(ctx)
	known := controller.Known()
	names := make([]string, 0, len(known))
	for n := range known {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		c, err := known[n](factory)
		if err != nil {
			return fmt.Errorf("cannot construct controller %s: %w", n, err)
		}
		fmt.Fprintln(os.Stderr, "cert-manager-controller: starting", n)
		g.Go(func() error { return c.Run(workers, ctx) })
	}
	// Informers start after every controller registered its handlers, as
	// cmd/controller/app.Run does.
	base.SharedInformerFactory.Start(ctx.Done())
	base.KubeSharedInformerFactory.Start(ctx.Done())
	base.HTTP01ResourceMetadataInformersFactory.Start(ctx.Done())
	return g.Wait()
}
