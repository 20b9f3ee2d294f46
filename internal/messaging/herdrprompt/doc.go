// Package herdrprompt adapts fleetd's herdr client to the messaging core's
// [messaging.Prompter]: Prompt is agent.prompt without wait (herdr types the
// text and presses Enter; the core watches for pickup itself), ReadTail is
// agent.read of the recent, unwrapped scrollback as plain text. Errors are
// herdr's own, unchanged, so that [messaging.DefaultClassify] can read their
// codes. The package holds no state and never retries: whether to try again
// is the core's decision.
package herdrprompt
