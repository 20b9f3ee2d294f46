package statedb

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Tables fleetd keeps, and who owns each (see the package doc).
const (
	// Owned: member name → the pane fleetd runs for it (controllers).
	Owned = "owned"
	// Memory: member name → what fleetd keeps of it across its panes
	// (controllers).
	Memory = "members"
	// Tokens: hex SHA-256 of a worker token → its member and pane
	// (package tokens).
	Tokens = "tokens"
	// Prompts: member uid → the first prompt queued for it
	// (internal/messaging).
	Prompts = "prompts"
	// Revisions: KIND/NAME (KIND profile or member) → the object's
	// revision history (internal/rollout).
	Revisions = "revisions"
)

// Change is one change of a table: [Put] or [Delete].
type Change struct {
	Table, Key string
	// Value is the key's new JSON value; nil deletes the key.
	Value []byte
}

// Put sets key of table to value, a JSON value (of its owner's making).
func Put(table, key string, value []byte) Change {
	if value == nil {
		value = []byte{} // refused by encode: a Put is never a Delete
	}
	return Change{Table: table, Key: key, Value: value}
}

// Delete removes key from table. Deleting a missing key is no change.
func Delete(table, key string) Change { return Change{Table: table, Key: key} }

// record is one line of the file: a change. V absent deletes the key.
type record struct {
	T string          `json:"t"`
	K string          `json:"k"`
	V json.RawMessage `json:"v,omitempty"`
}

// encode frames a change as the record the journal keeps: compact JSON,
// which never holds a newline.
func encode(c Change) ([]byte, error) {
	if c.Table == "" || c.Key == "" {
		return nil, fmt.Errorf("state database: a change needs a table and a key (table %q, key %q)", c.Table, c.Key)
	}
	if c.Value != nil && len(c.Value) == 0 {
		return nil, fmt.Errorf("state database: %s/%s: an empty value", c.Table, c.Key)
	}
	// Marshal checks and compacts the value.
	rec, err := json.Marshal(record{T: c.Table, K: c.Key, V: c.Value})
	if err != nil {
		return nil, fmt.Errorf("state database: %s/%s: the value is not JSON: %w", c.Table, c.Key, err)
	}
	return rec, nil
}

// decode reads one record of the file.
func decode(raw []byte) (Change, error) {
	var r record
	if err := json.Unmarshal(raw, &r); err != nil {
		return Change{}, err
	}
	if r.T == "" || r.K == "" {
		return Change{}, errors.New("a record without its table or key")
	}
	return Change{Table: r.T, Key: r.K, Value: r.V}, nil
}

// validRecord is decode as the journal's check of one record.
func validRecord(raw []byte) error {
	_, err := decode(raw)
	return err
}
