package decode

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Error is one problem found in a manifest file, located by file, line and
// field path.
type Error struct {
	File  string // path as given to File or Dir; "" when not from a file
	Line  int    // 1-based; 0 when unknown
	Field string // field path such as spec.mcpTarget.tenantId; "" for the whole document
	Msg   string
	// Kind and Name are the object the failing document declares — its
	// kind and metadata.name as written — when both read as strings: a
	// document with errors defines no object, and they say which one it
	// meant (`fleetd describe member NAME` names the broken file). Empty
	// for a syntax error and for problems not of one document.
	Kind, Name string

	cause error // the file-system error behind a read failure, for errors.Is
}

// Unwrap returns the file-system error behind a failure to read the file
// ([ReadManifest]), or nil.
func (e *Error) Unwrap() error { return e.cause }

// Error formats e as "FILE:LINE: field: message". The field part is left
// out for document-level errors, the line when it is unknown and the file
// when the error did not come from one.
func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		if e.Line > 0 {
			fmt.Fprintf(&b, ":%d", e.Line)
		}
		b.WriteString(": ")
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// ErrorList is every problem found, in file and line order.
type ErrorList []*Error

// Error formats one error per line.
func (l ErrorList) Error() string {
	s := make([]string, len(l))
	for i, e := range l {
		s[i] = e.Error()
	}
	return strings.Join(s, "\n")
}

// Err returns nil when l is empty and l otherwise.
func (l ErrorList) Err() error {
	if len(l) == 0 {
		return nil
	}
	return l
}

// Sort orders l by file, then line, keeping the order in which the errors
// were found among equals.
func (l ErrorList) Sort() {
	slices.SortStableFunc(l, func(a, b *Error) int {
		return cmp.Or(cmp.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line))
	})
}
