package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
)

// eventsServer answers GET /members/{name}/events with events[name].
func eventsServer(t *testing.T, events map[string][]v1alpha1.Event) *apiClient {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /members/{name}/events", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		ev, ok := events[r.PathValue("name")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		json.NewEncoder(w).Encode(ev)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &apiClient{base: srv.URL, token: "tok"}
}

func TestLastStarted_LatestStartedEventOfAnyMember(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	api := eventsServer(t, map[string][]v1alpha1.Event{
		memberName(0): {{Time: at(10), Reason: "Created"}, {Time: at(120), Reason: v1alpha1.ReasonStarted}},
		// A later event of another reason does not count; a second start
		// (the agent was replaced) does.
		memberName(1): {{Time: at(90), Reason: v1alpha1.ReasonStarted}, {Time: at(400), Reason: "Replacing"}},
		memberName(2): {{Time: at(95), Reason: v1alpha1.ReasonStarted}, {Time: at(130), Reason: v1alpha1.ReasonStarted}},
	})
	got, err := api.lastStarted(context.Background(), 3)
	if err != nil {
		t.Fatal(err)
	}
	if want := at(130); !got.Equal(want) {
		t.Errorf("lastStarted = %s, want %s", got.Format(time.RFC3339Nano), want.Format(time.RFC3339Nano))
	}
}

func TestLastStarted_MemberWithoutStartedEventIsAnError(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	api := eventsServer(t, map[string][]v1alpha1.Event{
		memberName(0): {{Time: t0, Reason: v1alpha1.ReasonStarted}},
		memberName(1): {{Time: t0, Reason: "Created"}},
	})
	_, err := api.lastStarted(context.Background(), 2)
	if err == nil || !strings.Contains(err.Error(), "member "+memberName(1)+" is Ready without a Started event") {
		t.Fatalf("lastStarted = %v, want the error naming %s", err, memberName(1))
	}
}
