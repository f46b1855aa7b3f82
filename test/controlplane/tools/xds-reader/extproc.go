package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
)

// extProcRequest is one HTTP request, as read on stdin for -ext-proc.
type extProcRequest struct {
	// Headers are the request's headers as Envoy's router filter sees
	// them, pseudo-headers included, names in lower case.
	Headers map[string]string `json:"headers"`
	// Body is the request's body.
	Body string `json:"body"`
	// Attributes are what the upstream filter's ext_proc is sent of the
	// xDS metadata of the backend Envoy picked: attribute path to value.
	Attributes map[string]string `json:"attributes"`
	// VerifyAWS, when set, holds the AWS credentials the request upstream
	// must be signed with: the reader signs that request anew with them
	// and says whether its Authorization is the same.
	VerifyAWS *awsCredentials `json:"verifyAWS,omitempty"`
}

// awsCredentials are what a SigV4 signature for Amazon Bedrock is made of.
type awsCredentials struct {
	AccessKeyID     string `json:"accessKeyID"`
	SecretAccessKey string `json:"secretAccessKey"`
	Region          string `json:"region"`
}

// extProcResult is what -ext-proc prints: the ext_proc's answers, and the
// request as Envoy would send it upstream once it applied them.
type extProcResult struct {
	Router   []json.RawMessage `json:"router"`
	Upstream []json.RawMessage `json:"upstream"`
	Request  struct {
		Headers map[string]string `json:"headers"`
		Body    string            `json:"body"`
	} `json:"request"`
	// SignatureVerified says, for -ext-proc with verifyAWS, whether the
	// request's Authorization is the SigV4 signature the given
	// credentials make of it; SignatureProblem says why not.
	SignatureVerified *bool  `json:"signatureVerified,omitempty"`
	SignatureProblem  string `json:"signatureProblem,omitempty"`
}

// extProcFilter is the filter name under which Envoy sends an ext_proc
// the attributes it asked for (ai-gateway v1.0.0
// internal/extproc/server.go, setBackend, reads them there).
const extProcFilter = "envoy.filters.http.ext_proc"

// callExtProc plays Envoy for one request through AI Gateway's two
// ext_proc filters on the ext_proc server at addr. The router filter's
// stream gets the request's headers, then its buffered body; the upstream
// filter's stream, opened while the router's is still open (the server
// pairs them by the internal request ID the router's answer adds, and
// forgets it when the router's stream ends: ai-gateway v1.0.0
// internal/extproc/server.go, Process), gets the headers as mutated so
// far with the backend's attributes. Each answer's header and body
// mutations are applied as Envoy applies them, and the result is written
// to out.
func callExtProc(addr string, timeout time.Duration, in io.Reader, out io.Writer) error {
	var req extProcRequest
	if err := json.NewDecoder(in).Decode(&req); err != nil {
		return fmt.Errorf("cannot read the request on stdin: %w", err)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("cannot dial %s: %w", addr, err)
	}
	defer conn.Close() //nolint:errcheck // nothing to do about it
	client := extprocv3.NewExternalProcessorClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()

	headers := map[string]string{}
	for k, v := range req.Headers {
		headers[strings.ToLower(k)] = v
	}
	body := []byte(req.Body)
	var res extProcResult

	router, err := client.Process(ctx)
	if err != nil {
		return fmt.Errorf("cannot open the router filter's stream: %w", err)
	}
	for i, msg := range []*extprocv3.ProcessingRequest{
		{Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: &extprocv3.HttpHeaders{Headers: headerMap(headers)}}},
		{Request: &extprocv3.ProcessingRequest_RequestBody{RequestBody: &extprocv3.HttpBody{Body: body, EndOfStream: true}}},
	} {
		answer, err := exchange(router, msg)
		if err != nil {
			return fmt.Errorf("router filter, message %d: %w", i, err)
		}
		if ir := answer.GetImmediateResponse(); ir != nil {
			return fmt.Errorf("router filter, message %d: an immediate response %d: %s", i, ir.GetStatus().GetCode(), ir.GetBody())
		}
		body = apply(headers, body, answer)
		b, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(answer)
		if err != nil {
			return err
		}
		res.Router = append(res.Router, b)
	}

	attrs := map[string]any{}
	for k, v := range req.Attributes {
		attrs[k] = v
	}
	st, err := structpb.NewStruct(attrs)
	if err != nil {
		return fmt.Errorf("cannot encode the attributes: %w", err)
	}
	upstream, err := client.Process(ctx)
	if err != nil {
		return fmt.Errorf("cannot open the upstream filter's stream: %w", err)
	}
	answer, err := exchange(upstream, &extprocv3.ProcessingRequest{
		Request:    &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: &extprocv3.HttpHeaders{Headers: headerMap(headers)}},
		Attributes: map[string]*structpb.Struct{extProcFilter: st},
	})
	if err != nil {
		return fmt.Errorf("upstream filter: %w", err)
	}
	if ir := answer.GetImmediateResponse(); ir != nil {
		return fmt.Errorf("upstream filter: an immediate response %d: %s", ir.GetStatus().GetCode(), ir.GetBody())
	}
	body = apply(headers, body, answer)
	b, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(answer)
	if err != nil {
		return err
	}
	res.Upstream = append(res.Upstream, b)
	_ = upstream.CloseSend()
	_ = router.CloseSend()

	res.Request.Headers = headers
	res.Request.Body = string(body)
	if v := req.VerifyAWS; v != nil {
		problem := verifySigV4(ctx, *v, headers, body)
		ok := problem == ""
		res.SignatureVerified, res.SignatureProblem = &ok, problem
	}
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(res)
}

// exchange sends msg on s and returns the answer.
func exchange(s extprocv3.ExternalProcessor_ProcessClient, msg *extprocv3.ProcessingRequest) (*extprocv3.ProcessingResponse, error) {
	if err := s.Send(msg); err != nil {
		return nil, fmt.Errorf("cannot send: %w", err)
	}
	answer, err := s.Recv()
	if err != nil {
		return nil, fmt.Errorf("cannot receive: %w", err)
	}
	return answer, nil
}

// headerMap is headers in ext_proc's form, in a stable order. Values go
// as raw_value, as Envoy sends them.
func headerMap(headers map[string]string) *corev3.HeaderMap {
	m := &corev3.HeaderMap{}
	for _, k := range slices.Sorted(maps.Keys(headers)) {
		m.Headers = append(m.Headers, &corev3.HeaderValue{Key: k, RawValue: []byte(headers[k])})
	}
	return m
}

// apply makes an answer's header mutations on headers, as Envoy does
// (names in lower case: HTTP/2 header names are), and returns the body
// after its body mutation.
func apply(headers map[string]string, body []byte, answer *extprocv3.ProcessingResponse) []byte {
	var common *extprocv3.CommonResponse
	switch r := answer.GetResponse().(type) {
	case *extprocv3.ProcessingResponse_RequestHeaders:
		common = r.RequestHeaders.GetResponse()
	case *extprocv3.ProcessingResponse_RequestBody:
		common = r.RequestBody.GetResponse()
	}
	if common == nil {
		return body
	}
	for _, k := range common.GetHeaderMutation().GetRemoveHeaders() {
		delete(headers, strings.ToLower(k))
	}
	for _, h := range common.GetHeaderMutation().GetSetHeaders() {
		v := h.GetHeader().GetValue()
		if raw := h.GetHeader().GetRawValue(); len(raw) > 0 {
			v = string(raw)
		}
		headers[strings.ToLower(h.GetHeader().GetKey())] = v
	}
	if m := common.GetBodyMutation(); m != nil {
		switch bm := m.GetMutation().(type) {
		case *extprocv3.BodyMutation_Body:
			body = bm.Body
		case *extprocv3.BodyMutation_ClearBody:
			if bm.ClearBody {
				body = nil
			}
		}
	}
	return body
}

// verifySigV4 returns "" when headers carry the SigV4 signature, for
// Amazon Bedrock in c.Region, that c makes of the request at the time its
// x-amz-date says, or what differs. The request is signed as AI Gateway's
// ext_proc builds it (ai-gateway v1.0.0 internal/backendauth/aws.go, Do:
// the Bedrock runtime host of the region, the path and the body as sent
// upstream, no content length), with the AWS SDK's own signer: an
// Authorization made with another secret key, for another region or
// service, or over another body, differs.
func verifySigV4(ctx context.Context, c awsCredentials, headers map[string]string, body []byte) string {
	at, err := time.Parse("20060102T150405Z", headers["x-amz-date"])
	if err != nil {
		return fmt.Sprintf("cannot read x-amz-date %q: %v", headers["x-amz-date"], err)
	}
	r, err := http.NewRequestWithContext(ctx, headers[":method"], "https://bedrock-runtime."+c.Region+".amazonaws.com"+headers[":path"], bytes.NewReader(body))
	if err != nil {
		return err.Error()
	}
	r.ContentLength = -1
	hash := sha256.Sum256(body)
	creds := aws.Credentials{AccessKeyID: c.AccessKeyID, SecretAccessKey: c.SecretAccessKey}
	if err := v4.NewSigner().SignHTTP(ctx, creds, r, hex.EncodeToString(hash[:]), "bedrock", c.Region, at); err != nil {
		return fmt.Sprintf("cannot sign: %v", err)
	}
	if got, want := headers["authorization"], r.Header.Get("Authorization"); got != want {
		return fmt.Sprintf("the request's Authorization %q is not the signature of the given credentials, %q", got, want)
	}
	return ""
}
