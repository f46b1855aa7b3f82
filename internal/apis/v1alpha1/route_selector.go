package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/crossplane/function-sdk-go/errors"
)

// Selector is the selector as Kubernetes evaluates it, or an error that
// names spec.gatewaySelector and what is wrong with it: a selector that
// selects nothing in particular (empty), or a key, value or operator that
// Kubernetes' label selectors refuse.
func (g *GatewaySelector) Selector() (labels.Selector, error) {
	if len(g.MatchLabels) == 0 && len(g.MatchExpressions) == 0 {
		return nil, errors.New("spec.gatewaySelector selects nothing: set matchLabels or matchExpressions; a selector that is empty by mistake must not take in every InferenceGateway")
	}
	sel, err := metav1.LabelSelectorAsSelector(g.labelSelector())
	if err != nil {
		return nil, errors.Errorf("spec.gatewaySelector %s is not a label selector: %v", g, err)
	}
	return sel, nil
}

// String is the selector in kubectl's notation, such as
// region=eu,tier in (gpu), for messages.
func (g *GatewaySelector) String() string {
	return metav1.FormatLabelSelector(g.labelSelector())
}

// labelSelector is g as a Kubernetes label selector.
func (g *GatewaySelector) labelSelector() *metav1.LabelSelector {
	ls := &metav1.LabelSelector{MatchLabels: g.MatchLabels}
	for _, e := range g.MatchExpressions {
		ls.MatchExpressions = append(ls.MatchExpressions, metav1.LabelSelectorRequirement{
			Key: e.Key, Operator: metav1.LabelSelectorOperator(e.Operator), Values: e.Values,
		})
	}
	return ls
}
