// Package herdrprompt adapts fleetd's herdr client to the messaging core's
// [messaging.Prompter]: Prompt is agent.prompt without wait (herdr types the
// text and presses Enter; the core watches for pickup itself), ReadTail is
// agent.read of the recent, unwrapped scrollback as plain text.
//
// It is the one place where herdr's error codes mean something to
// messaging: [Classify] sorts agent.prompt's errors into the core's verdicts
// (refused before typing, outcome unknown, refused for good), and Prompt
// returns them as a *messaging.PromptError that still wraps herdr's error,
// so that herdr.IsCode keeps working on it. The core's status words
// (messaging.StatusIdle, …) are herdr's agent statuses; this package's
// tests pin that. The package holds no state and never retries: whether to
// try again is the core's decision.
package herdrprompt
