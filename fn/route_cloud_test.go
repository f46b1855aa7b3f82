package fn

import (
	"maps"
	"testing"

	"github.com/google/go-cmp/cmp"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
)

// cloudBackend is a backend named name of the schema with credentials.
func cloudBackend(name, schema string, credentials obj) obj {
	return obj{"name": name, "endpoint": obj{"hostname": name + ".example.com"}, "schema": obj{"name": schema}, "credentials": credentials}
}

// The values of the cloud Secrets: none may leave the function.
const (
	awsFileValue     = "[default]\naws_access_key_id = AKIATESTONLY0000001\naws_secret_access_key = never-publish-aws-secret\n"
	gcpKeyValue      = `{"type": "service_account", "private_key": "never-publish-gcp-key"}`
	azureSecretValue = "never-publish-azure-client-secret"
)

func TestModelRouteCloudCredentials(t *testing.T) {
	type want struct {
		// policy is the BackendSecurityPolicy's spec less its targetRefs.
		policy obj
		// copyTo is where the credential copy puts the key, "" for none.
		copyTo string
		// secret is the Secret the route requires, "" for none.
		secret string
	}
	cases := map[string]struct {
		reason  string
		backend obj
		secrets map[string][]obj
		want    want
	}{
		"AWSFile": {
			reason: "AWS with a credentials file: an AWSCredentials policy naming the copy and the profile, the file copied under credentials.",
			backend: cloudBackend("bedrock", "AWSBedrock", obj{"aws": obj{"region": "eu-west-1", "profile": "inference",
				"secretRef": obj{"name": "aws-creds", "key": "credentials"}}}),
			secrets: map[string][]obj{"secret-aws-creds": {secret("aws-creds", obj{"credentials": b64(awsFileValue)})}},
			want: want{policy: obj{"type": "AWSCredentials", "awsCredentials": obj{"region": "eu-west-1",
				"credentialsFile": obj{"profile": "inference", "secretRef": obj{"name": "qwen-bedrock"}}}}, copyTo: "data.credentials", secret: "aws-creds"},
		},
		"AWSDefaultProfile": {
			reason: "The profile defaults to AI Gateway's default.",
			backend: cloudBackend("bedrock", "AWSAnthropic", obj{"aws": obj{"region": "us-east-1",
				"secretRef": obj{"name": "aws-creds", "key": "creds"}}}),
			secrets: map[string][]obj{"secret-aws-creds": {secret("aws-creds", obj{"creds": b64(awsFileValue)})}},
			want: want{policy: obj{"type": "AWSCredentials", "awsCredentials": obj{"region": "us-east-1",
				"credentialsFile": obj{"profile": "default", "secretRef": obj{"name": "qwen-bedrock"}}}}, copyTo: "data.credentials", secret: "aws-creds"},
		},
		"AWSPodIdentity": {
			reason:  "AWS without a Secret: the region alone, nothing copied, nothing required.",
			backend: cloudBackend("bedrock", "AWSBedrock", obj{"aws": obj{"region": "eu-west-1"}}),
			want:    want{policy: obj{"type": "AWSCredentials", "awsCredentials": obj{"region": "eu-west-1"}}},
		},
		"GCP": {
			reason: "GCP: a GCPCredentials policy, the key copied under service_account.json, in brackets for its dot.",
			backend: cloudBackend("vertex", "GCPVertexAI", obj{"gcp": obj{"projectName": "my-proj", "region": "europe-west4",
				"secretRef": obj{"name": "gcp-sa", "key": "key.json"}}}),
			secrets: map[string][]obj{"secret-gcp-sa": {secret("gcp-sa", obj{"key.json": b64(gcpKeyValue)})}},
			want: want{policy: obj{"type": "GCPCredentials", "gcpCredentials": obj{"projectName": "my-proj", "region": "europe-west4",
				"credentialsFile": obj{"secretRef": obj{"name": "qwen-vertex"}}}}, copyTo: "data[service_account.json]", secret: "gcp-sa"},
		},
		"GCPWorkloadIdentity": {
			reason:  "GCP without a Secret: the project and region alone, for the Envoy pods' Application Default Credentials; nothing copied, nothing required.",
			backend: cloudBackend("vertex", "GCPVertexAI", obj{"gcp": obj{"projectName": "my-proj", "region": "europe-west4"}}),
			want:    want{policy: obj{"type": "GCPCredentials", "gcpCredentials": obj{"projectName": "my-proj", "region": "europe-west4"}}},
		},
		"Azure": {
			reason: "Azure: an AzureCredentials policy, the client secret copied under client-secret.",
			backend: cloudBackend("azure", "AzureOpenAI", obj{"azure": obj{"clientID": "app-1", "tenantID": "tenant-1",
				"clientSecretRef": obj{"name": "azure-sp", "key": "secret"}}}),
			secrets: map[string][]obj{"secret-azure-sp": {secret("azure-sp", obj{"secret": b64(azureSecretValue)})}},
			want: want{policy: obj{"type": "AzureCredentials", "azureCredentials": obj{"clientID": "app-1", "tenantID": "tenant-1",
				"clientSecretRef": obj{"name": "qwen-azure"}}}, copyTo: "data.client-secret", secret: "azure-sp"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			required := map[string][]obj{"gateway": gwReady}
			maps.Copy(required, tc.secrets)
			be := tc.backend["name"].(string)
			// The copy names its source only once provider-kubernetes has
			// created it (the key-reference-at-creation break): a few
			// reconciles, each applied and synced.
			var observed map[string]obj
			var req *fnv1.RunFunctionRequest
			var rsp *fnv1.RunFunctionResponse
			for range 3 {
				req = newRequest(t, routeXR(tc.backend), observed, required)
				rsp = run(t, req)
				observed = settle(t, rsp)
			}
			got := want{}
			if p := manifest(rsp, "credpolicy-"+be); p != nil {
				spec := p["spec"].(obj)
				delete(spec, "targetRefs")
				got.policy = spec
			}
			if c := manifest(rsp, "credential-"+be); c != nil {
				r := rsp.GetDesired().GetResources()["credential-"+be].GetResource().AsMap()
				refs, _ := r["spec"].(obj)["references"].([]any)
				if len(refs) > 0 {
					got.copyTo, _ = refs[0].(obj)["toFieldPath"].(string)
				}
			}
			if r, ok := rsp.GetRequirements().GetResources()["secret-"+tc.want.secret]; ok {
				got.secret = r.GetMatchName()
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s", tc.reason, diff)
			}
			noLeak(t, req, []string{awsFileValue, gcpKeyValue, azureSecretValue, b64(awsFileValue), b64(gcpKeyValue), b64(azureSecretValue)}, "a cloud credential")
		})
	}
}

func TestModelRouteCloudCredentialsRefused(t *testing.T) {
	withKey := cloudBackend("azure", "AzureOpenAI", obj{"azure": obj{"clientID": "a", "tenantID": "t", "clientSecretRef": obj{"name": "s", "key": "k"}}})
	withKey["apiKey"] = obj{"secretRef": obj{"name": "key-a", "key": "api-key"}}
	cases := map[string]struct {
		reason  string
		backend obj
		want    []string
	}{
		"AWSOnOpenAI": {
			reason:  "AWS credentials on an OpenAI backend: Fatal naming the field and the schema.",
			backend: cloudBackend("b", "OpenAI", obj{"aws": obj{"region": "eu-west-1"}}),
			want:    []string{"spec.backends[0].credentials.aws", "OpenAI schema", "AWSBedrock and AWSAnthropic"},
		},
		"GCPOnAzure": {
			reason:  "GCP credentials on an AzureOpenAI backend.",
			backend: cloudBackend("b", "AzureOpenAI", obj{"gcp": obj{"projectName": "p", "region": "r", "secretRef": obj{"name": "s", "key": "k"}}}),
			want:    []string{"spec.backends[0].credentials.gcp", "AzureOpenAI schema"},
		},
		"TwoClouds": {
			reason: "Two clouds at once.",
			backend: cloudBackend("b", "AWSBedrock", obj{"aws": obj{"region": "eu-west-1"},
				"gcp": obj{"projectName": "p", "region": "r", "secretRef": obj{"name": "s", "key": "k"}}}),
			want: []string{"spec.backends[0].credentials sets 2 clouds", "exactly one"},
		},
		"WithAPIKey": {
			reason:  "An API key beside credentials.",
			backend: withKey,
			want:    []string{"spec.backends[0] has both apiKey and credentials"},
		},
		"ProfileWithoutFile": {
			reason:  "A profile without a credentials file names nothing.",
			backend: cloudBackend("b", "AWSBedrock", obj{"aws": obj{"region": "eu-west-1", "profile": "p"}}),
			want:    []string{"spec.backends[0].credentials.aws.profile needs credentials.aws.secretRef"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Log(tc.reason)
			rsp := run(t, newRequest(t, routeXR(tc.backend), nil, map[string][]obj{"gateway": gwReady}))
			expectFatal(t, rsp, tc.want...)
		})
	}
}
