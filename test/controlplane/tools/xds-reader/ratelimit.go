package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protojson"

	// The rate-limit service's configuration, for -ratelimit-config.
	_ "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
)

// shouldRateLimit calls the rate-limit service's ShouldRateLimit once for
// each request of the JSON array read from in, in order, on one
// connection, as Envoy's rate-limit filter does for each request (and, for
// a rate limit with apply_on_stream_done, once more when the response is
// done), and writes the answers to out as a JSON array, in protojson with
// the proto field names. certDir holds the client certificate
// (Envoy's: the rate-limit service is served over mutual TLS, gateway
// v1.8.3 internal/infrastructure/kubernetes/ratelimit/resource.go,
// GRPC_SERVER_USE_TLS).
func shouldRateLimit(addr, certDir, server string, timeout time.Duration, in io.Reader, out io.Writer) error {
	var raw []json.RawMessage
	if err := json.NewDecoder(in).Decode(&raw); err != nil {
		return fmt.Errorf("cannot read the requests on stdin: %w", err)
	}
	if certDir == "" {
		return fmt.Errorf("-cert-dir is required: the rate-limit service wants a client certificate")
	}
	creds, err := dialTLS(certDir, server)
	if err != nil {
		return err
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		return fmt.Errorf("cannot dial %s: %w", addr, err)
	}
	defer conn.Close() //nolint:errcheck // nothing to do about it
	client := ratelimitv3.NewRateLimitServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	answers := make([]json.RawMessage, 0, len(raw))
	for i, r := range raw {
		req := &ratelimitv3.RateLimitRequest{}
		if err := protojson.Unmarshal(r, req); err != nil {
			return fmt.Errorf("cannot decode request %d: %w", i, err)
		}
		resp, err := client.ShouldRateLimit(ctx, req)
		if err != nil {
			return fmt.Errorf("cannot call ShouldRateLimit for request %d: %w", i, err)
		}
		b, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(resp)
		if err != nil {
			return err
		}
		answers = append(answers, b)
	}
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(answers)
}
