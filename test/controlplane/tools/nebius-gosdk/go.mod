// A stand-in for github.com/nebius/gosdk v0.2.28, whose module zip the Go
// module proxy refuses to serve here. provider-kubernetes v1.3.1 calls it only
// to log in to Nebius clouds, which the control-plane tests never do.
module github.com/nebius/gosdk

go 1.26.0
