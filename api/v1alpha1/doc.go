// Package v1alpha1 holds fleetd's API objects — Member, Profile and Tenant of
// apiVersion fleetd.dev/v1alpha1 — with their defaults, validation and deep
// copies.
//
// The types are shaped so they can become Kubernetes CRDs unchanged: JSON
// tags, metadata/spec/status, conditions shaped like metav1.Condition, and no
// interfaces in any spec. This package never reads files or talks to herdr;
// decoding from YAML lives in package api/decode.
package v1alpha1
