package messaging_test

import (
	"context"
	"fmt"
	"os"

	"github.com/fleetd-dev/fleetd/internal/messaging"
)

// typist is a Prompter that reports what would be typed on a channel.
type typist chan string

func (t typist) Prompt(_ context.Context, target, text string) error {
	t <- fmt.Sprintf("typed into %s: %s", target, text)
	return nil
}

func (typist) ReadTail(context.Context, string, int) (string, error) { return "", nil }

// A detached send, the worker's reply landing in the primary's mailbox, and
// the primary polling and acknowledging it.
func Example_detached() {
	dir, _ := os.MkdirTemp("", "messaging-example")
	defer os.RemoveAll(dir)
	typed := make(typist, 1)
	core, err := messaging.New(dir, typed, nil)
	if err != nil {
		panic(err)
	}
	defer core.Close()
	ctx := context.Background()

	// The reconciler reports the worker's agent idle; the injector may type.
	core.ObserveStatus("reviewer", messaging.StatusIdle, 1)
	sent, _ := core.Send(ctx, messaging.SendRequest{From: "primary", To: "reviewer", Content: "review PR 7"})
	fmt.Println("send:", sent.Outcome)
	fmt.Println(<-typed) // delivery runs in the background

	// herdr's event stream: the agent picked the prompt up.
	core.ObserveStatus("reviewer", messaging.StatusWorking, 2)
	rep, _ := core.Reply(ctx, "reviewer", "LGTM", true)
	fmt.Println("reply:", rep.Mode)

	msgs, _ := core.Poll(ctx, "primary", false, 0)
	for _, m := range msgs {
		fmt.Printf("mail: %s from %s: %s (same turn: %v)\n", m.Kind, m.From, m.Content, m.TurnID == sent.TurnID)
	}
	n, _ := core.Ack("primary", []string{msgs[0].ID})
	fmt.Println("acked:", n, "pending:", core.Pending("primary"))
	// Output:
	// send: dispatched
	// typed into reviewer: review PR 7
	// reply: queued
	// mail: reply from reviewer: LGTM (same turn: true)
	// acked: 1 pending: 0
}
