// Package gatewayready judges GatewayReady, an InferenceGateway's
// readiness, in one call (judge.go, Judge) on one read-only Input: it reads
// the evidence the observed Objects show on the gateway cluster
// (evidence.go), judges what package gateway read of its Secret-fed
// features (features.go: TLS, the client certificate, the callers),
// applies the rollout rule to the Envoy Deployment, decides on the
// function's own ext-proc marker (marker.go), and turns the failed checks
// into the condition, its reason, and when to look again (requeue.go).
// Package gateway reads the spec and the Secrets, builds the Objects on the
// verdict, and reports it.
package gatewayready

import (
	"github.com/modelplaneai/function-inference-gateway/internal/compose"
	"github.com/modelplaneai/function-inference-gateway/internal/rollout"
)

// ConditionType is the condition the function reports on an
// InferenceGateway.
const ConditionType = "GatewayReady"

// Reasons for GatewayReady. The rollout reasons are the names of the rollout
// rule's clauses (package rollout).
const (
	// ReasonReady: the gateway serves, and every pod that serves has the
	// ext-proc sidecar.
	ReasonReady = "Serving"

	// ReasonClusterAlreadyHasGateway: another InferenceGateway serves on
	// the same cluster (providerConfigName); this one composes nothing
	// there.
	ReasonClusterAlreadyHasGateway = "ClusterAlreadyHasGateway"

	// ReasonWaitingForPreviousGateway: this InferenceGateway has won its
	// cluster from one that composed it before (deleted, or being
	// deleted), whose Objects are not all gone yet; it composes nothing
	// there until they are.
	ReasonWaitingForPreviousGateway = "WaitingForPreviousGateway"

	// ReasonTLSSecretMissing: a TLS Secret named by spec.tls.certificateRefs
	// is missing on the control plane, lacks tls.crt or tls.key, holds a
	// key that is not its certificate's, or has not reached the gateway
	// cluster yet, so the https listener cannot terminate TLS.
	ReasonTLSSecretMissing = "TLSSecretMissing"

	// ReasonClientCertificateNotReady: spec.backendTLS.clientCertificate
	// is set and cert-manager has not issued the first certificate yet, or
	// the caSecretRef Secret is missing, incomplete or not on the gateway
	// cluster yet, so no backend that requires the certificate can be
	// reached.
	ReasonClientCertificateNotReady = "ClientCertificateNotReady"

	// ReasonCallerSecretsMissing: spec.auth is set but no callers' Secret
	// that spec.auth.apiKey.secretSelector selects can be used, so the
	// gateway denies every model request.
	ReasonCallerSecretsMissing = "CallerSecretsMissing"

	// ReasonNotProgrammed: the Gateway has no address yet.
	ReasonNotProgrammed = "GatewayNotProgrammed"

	// ReasonListenersNotProgrammed: a listener of the Gateway is not
	// Programmed or its references are not resolved (a certificate or key
	// that does not parse, or an expired certificate), or Envoy Gateway has not reported it for the Gateway's
	// current generation yet: the model routes on it get no traffic.
	ReasonListenersNotProgrammed = "ListenersNotProgrammed"

	// ReasonAnchorNotAccepted: AI Gateway has not accepted the anchor route.
	ReasonAnchorNotAccepted = "AnchorNotAccepted"

	// ReasonClientPolicyNotAccepted: Envoy Gateway has not accepted the
	// ClientTrafficPolicy, so bodies over its default 32 KiB buffer fail.
	ReasonClientPolicyNotAccepted = "ClientPolicyNotAccepted"

	// ReasonTrafficPolicyNotAccepted: Envoy Gateway has not accepted the
	// BackendTrafficPolicy, which carries failover and the token budgets.
	// While it refuses it, every route it covers answers 500: with budgets,
	// for example, when global rate limiting is not enabled in Envoy
	// Gateway's configuration.
	ReasonTrafficPolicyNotAccepted = "TrafficPolicyNotAccepted"

	// ReasonCallerAuthNotAccepted: the caller-auth SecurityPolicy is not
	// in force yet, or Envoy Gateway rejected it (Modelplane's name).
	ReasonCallerAuthNotAccepted = "CallerAuthNotAccepted"

	// ReasonDeploymentNotObserved: the Envoy Deployment has not been seen,
	// or the last look found it gone.
	ReasonDeploymentNotObserved = "DeploymentNotObserved"

	// ReasonSpecRefused: the function refuses the InferenceGateway's spec,
	// and keeps everything composed before as it was (compose.Refuse).
	ReasonSpecRefused = compose.ReasonSpecRefused

	ReasonGenerationNotObserved = string(rollout.GenerationNotObserved)
	ReasonExtProcMarkerMissing  = string(rollout.ExtProcMarkerMissing)
	ReasonOldReplicasPresent    = string(rollout.OldReplicasPresent)
	ReasonNoReplicaAvailable    = string(rollout.NoReplicaAvailable)
)
