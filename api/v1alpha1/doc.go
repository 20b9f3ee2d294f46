// Package v1alpha1 holds fleetd's API objects — Member, Profile and Tenant of
// apiVersion fleetd.dev/v1alpha1 — with their defaults, validation and deep
// copies.
//
// The types are shaped so they can become Kubernetes CRDs unchanged: JSON
// tags, metadata/spec/status, conditions shaped like metav1.Condition, and no
// interfaces in any spec. Deep copies are hand-written in controller-gen's
// shape (DeepCopy, DeepCopyInto, DeepCopyObject).
//
// The status vocabulary lives here too, once: condition types, statuses and
// every condition reason fleetd writes ([ReasonProfileNotFound],
// [ReasonInvalidSpec], …), so that the controller that writes a reason, the
// plan resolver that returns one and the tools that read one share a word
// instead of restating a string.
//
// SetDefaults fills what an operator may leave out (a Member's mcpTarget,
// transport and workspace; a Profile's restartPolicy, startupTimeout and
// toolTimeout) and never overwrites a set value. Validate is fail-closed and
// returns every problem as a [FieldError] located by field path, such as
// spec.mcpTarget.tenantId; it checks names ([MemberNamePattern] for Members,
// because a member's name becomes its herdr agent name, and
// [ObjectNamePattern] for Profiles, Tenants and references to them), enum
// values, herdr's startupTimeout bounds and environment variable names, and
// bounds every object at entry: metadata.labels and annotations follow
// Kubernetes' rules and limits (a key is a name of at most [MaxLabelLength]
// characters with an optional DNS-subdomain prefix of at most
// [MaxLabelPrefixLength]; annotations hold at most [MaxAnnotationsBytes]),
// a Member's spec.workspace (a herdr label) is at most [MaxLabelLength]
// characters without control characters, a spec.prompt at most
// [MaxContentBytes], the limit the messaging core holds every message's
// content to (it takes its default from here), so a prompt that could never
// be delivered is refused where it is written, every other free text has a
// bound of its own ([MaxPathBytes], [MaxLaunchBytes], …), and the whole —
// metadata and spec as JSON — is at most [MaxObjectJSONBytes], so that any
// member fits in one event of the member watch.
//
// A Member may work in a git worktree of its own (worktree.go): its
// spec.worktree (repository, branch, base, cleanup), or the one its
// Profile's spec.worktree gives every member that sets no spec.cwd (branch
// PREFIX/NAME). Validation holds these to paths and git names — an
// absolute repository path, branch and base names by git's own
// check-ref-format rules and never option-like, spec.worktree and
// spec.cwd exclusive — and [Member.WorktreeOf] is the one statement of
// which worktree a member gets; [MemberWorktree.Claim] is what no two
// members may share (the decoder's cross-object check and the gateway's
// write check compare it).
//
// The closed shape of a Member's spec has its one word list here as well:
// [KeyWords] splits a field name into words and [ClassifyKey] says whether
// it names an environment bag, a command, headers, an endpoint, a
// credential or a provider's setting. The manifest decoder and the spawn
// guard both judge keys with it, each refusing the classes its rule covers;
// [IsOwnField] names the spec's own fields whose key the list flags
// (spec.worktree.base, a git ref), let through by their path only.
//
// This package never reads files, the environment or the network, and never
// talks to herdr; decoding from YAML, with file and line numbers, lives in
// package api/decode.
package v1alpha1
