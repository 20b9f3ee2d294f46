// Package herdrprompt adapts fleetd's herdr client to the messaging core's
// [messaging.Prompter]: Prompt is agent.prompt without wait (herdr types the
// text and presses Enter; the core watches for pickup itself), ReadTail is
// internal/tail's one terminal read ([tail.Screen]: agent.read of the
// visible screen as plain text, never more lines than the viewport, so
// that a read changes nothing) — the text a turn_done carries, and what
// `fleetd logs` and the console read through this adapter.
//
// It is the one place where herdr's error codes mean something to
// messaging: [Classify] sorts agent.prompt's errors into the core's verdicts
// (refused before typing; outcome unknown — agent_prompt_stalled, and
// protocol 22's agent_prompt_failed and timeout after the text was typed —
// which the core marks uncertain and never re-sends; refused for good), and
// Prompt returns them as a *messaging.PromptError that still wraps herdr's
// error, so that herdr.IsCode keeps working on it. The core's status words
// (messaging.StatusIdle, …) are herdr's agent statuses; this package's
// tests pin that. It never retries: whether to try again is the core's
// decision. [Prompter.HoldWhile] makes Prompt refuse untyped (NotSent)
// while its caller says so: fleetd holds prompts while its view of herdr is
// not in sync, so that none reaches an agent a herdr restart relaunched
// before the core has heard of the relaunch.
//
// Turns end on evidence: [Prompter.Feed] wraps the core's ObserveStatus.
// The core ends a turn when it sees the worker working and then idle; a
// turn whose working phase fleetd never saw (its status events were lost)
// would stay open until its timeout. herdr's completion_seq (protocol 22)
// advances whenever the agent finished work, so the feed keeps the value
// agent.prompt answered with, and when the worker is observed idle with no
// start seen since, asks herdr once (agent.get): a completion_seq past the
// one at delivery is the turn having run, and the feed passes the missed
// change on. On protocol 20 (no completion_seq) observations pass through
// unchanged. The feed's only state is, per worker, that delivery baseline
// and the offset its added changes put on the numbering, and only while
// there is one: a worker with neither has no entry.
package herdrprompt
