package herdr_test

import (
	"context"
	"errors"
	"log"

	"github.com/fleetd-dev/fleetd/herdr"
)

// Starting an agent in a fresh tab and telling "herdr said no" from "herdr
// is down".
func Example() {
	ctx := context.Background()
	c := herdr.New(nil) // socket resolved like herdr: $HERDR_SOCKET_PATH, HERDR_SESSION, ~/.config/herdr
	if _, err := c.Ping(ctx); err != nil {
		log.Fatal(err) // herdr down, or a protocol mismatch
	}
	tab, err := c.CreateTab(ctx, herdr.TabCreateParams{Label: "reviewer", CWD: "/src"})
	if err != nil {
		log.Fatal(err)
	}
	agent, err := c.StartAgent(ctx, herdr.AgentStartParams{
		Name: "reviewer", Kind: "claude", PaneID: tab.RootPane.PaneID, TimeoutMS: 60000,
	}, herdr.DefaultPollInterval)
	switch {
	case errors.Is(err, herdr.ErrUnavailable):
		log.Print("herdr is not reachable; try again later")
	case herdr.IsCode(err, "agent_name_taken"):
		log.Print("another agent already has that name")
	case err != nil:
		log.Print(err)
	default:
		log.Printf("agent %s ready in %s", agent.Name, agent.PaneID)
	}
}

// Following an agent's status and the pane lifecycle until the stream drops.
func ExampleClient_Subscribe() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := herdr.New(nil)
	s, err := c.Subscribe(ctx, []herdr.Subscription{
		{Type: herdr.SubPaneClosed},
		{Type: herdr.SubPaneExited},
		{Type: herdr.SubPaneAgentStatusChanged, PaneID: "w1:p2"},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	for ev := range s.Events() {
		switch ev.Kind {
		case herdr.EventPaneAgentStatusChanged:
			log.Printf("%s is %s", ev.PaneID, ev.AgentStatus)
		case herdr.EventPaneClosed, herdr.EventPaneExited:
			log.Printf("%s is gone", ev.PaneID)
		}
	}
	if errors.Is(s.Err(), herdr.ErrStreamDropped) {
		log.Print("stream dropped; resubscribe")
	}
}
