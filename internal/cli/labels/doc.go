// Package labels is the label selector `fleetd get -l` takes: Kubernetes'
// syntax, a comma-separated list of requirements that must all hold —
//
//	key=value  key==value  key!=value
//	key in (a,b)  key notin (a,b)
//	key  !key
//
// != and notin also match an object without the key, as in Kubernetes.
// fleetd parses it itself rather than link k8s.io/apimachinery/pkg/labels,
// which brings apimachinery's util, validation and klog packages into a
// binary that otherwise has no Kubernetes dependency; fleetd's label keys
// are also freer than Kubernetes' (any non-empty key of at most 63
// characters without control characters, docs/manifests.md), so a
// selector is checked only for its shape. A selector is at most
// [MaxSelectorBytes].
//
// It never does: validate labels themselves (package api/v1alpha1 does),
// or read or filter objects — a caller asks [Selector.Matches] of each.
package labels
