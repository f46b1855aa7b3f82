// Package manifests decodes the YAML streams the tests read: package
// contents, deploy manifests, examples.
package manifests

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
)

// Decode returns the objects of a YAML or JSON stream, skipping empty
// documents; numbers come out as int64 or float64, as the API server
// decodes them.
func Decode(b []byte) ([]*unstructured.Unstructured, error) {
	d := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	var objs []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		err := d.Decode(&u.Object)
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("cannot decode a YAML document: %w", err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}
