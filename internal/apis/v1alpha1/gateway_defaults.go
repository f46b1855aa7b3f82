package v1alpha1

import (
	"slices"

	egv1a1 "github.com/envoyproxy/gateway/api/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// The InferenceGateway's spec read with its defaults: the API server fills
// in the schema's defaults, but crossplane render does not, so the function
// applies them again when a field is unset.

// TLSEnabled reports whether the gateway terminates TLS.
func (s *InferenceGatewaySpec) TLSEnabled() bool { return s.TLS != nil }

// ReplicaCount is spec.replicas or its default.
func (s *InferenceGatewaySpec) ReplicaCount() int32 {
	if s.Replicas == nil {
		return DefaultReplicas
	}
	return *s.Replicas
}

// BufferLimit is spec.connection.bufferLimit or its default.
func (s *InferenceGatewaySpec) BufferLimit() resource.Quantity {
	if s.Connection == nil || s.Connection.BufferLimit == nil {
		return DefaultBufferLimit
	}
	return *s.Connection.BufferLimit
}

// NumRetries is spec.failover.numRetries or its default.
func (s *InferenceGatewaySpec) NumRetries() int32 {
	if s.Failover == nil || s.Failover.NumRetries == nil {
		return DefaultNumRetries
	}
	return *s.Failover.NumRetries
}

// PanicThreshold is spec.failover.panicThreshold or its default.
func (s *InferenceGatewaySpec) PanicThreshold() int32 {
	if s.Failover == nil || s.Failover.PanicThreshold == nil {
		return DefaultPanicThreshold
	}
	return *s.Failover.PanicThreshold
}

// RetryOn is what is retried: spec.failover.retryOn, each list defaulted
// on its own. Status codes only take effect with the
// retriable-status-codes trigger, so that trigger is added whenever codes
// are listed.
func (s *InferenceGatewaySpec) RetryOn() *egv1a1.RetryOn {
	triggers, codes := DefaultRetryTriggers, DefaultRetryStatusCodes
	if s.Failover != nil && s.Failover.RetryOn != nil {
		if t := s.Failover.RetryOn.Triggers; len(t) > 0 {
			triggers = make([]egv1a1.TriggerEnum, len(t))
			for i, v := range t {
				triggers[i] = egv1a1.TriggerEnum(v)
			}
		}
		if c := s.Failover.RetryOn.HTTPStatusCodes; c != nil {
			codes = c
		}
	}
	out := &egv1a1.RetryOn{Triggers: slices.Clone(triggers)}
	for _, c := range codes {
		out.HTTPStatusCodes = append(out.HTTPStatusCodes, egv1a1.HTTPStatus(c))
	}
	if len(codes) > 0 && !slices.Contains(out.Triggers, egv1a1.RetriableStatusCodes) {
		out.Triggers = append(out.Triggers, egv1a1.RetriableStatusCodes)
	}
	return out
}

// DrainTimeout is spec.envoy.drainTimeout or its default.
func (s *InferenceGatewaySpec) DrainTimeout() string {
	if s.Envoy == nil || s.Envoy.DrainTimeout == nil {
		return DefaultDrainTimeout
	}
	return *s.Envoy.DrainTimeout
}

// WhenUnsatisfiable is spec.envoy.spread.whenUnsatisfiable or its default.
func (s *InferenceGatewaySpec) WhenUnsatisfiable() corev1.UnsatisfiableConstraintAction {
	if s.Envoy == nil || s.Envoy.Spread == nil || s.Envoy.Spread.WhenUnsatisfiable == "" {
		return DefaultWhenUnsatisfiable
	}
	return corev1.UnsatisfiableConstraintAction(s.Envoy.Spread.WhenUnsatisfiable)
}

// AccessLogEnabled is spec.envoy.accessLog.enabled or its default, true.
func (s *InferenceGatewaySpec) AccessLogEnabled() bool {
	if s.Envoy == nil || s.Envoy.AccessLog == nil || s.Envoy.AccessLog.Enabled == nil {
		return DefaultAccessLogEnabled
	}
	return *s.Envoy.AccessLog.Enabled
}
