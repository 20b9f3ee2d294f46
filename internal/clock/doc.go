// Package clock is fleetd's one time source. Every part that waits or stamps
// a time takes a [Clock] instead of reading the wall clock: the controllers
// (the reconciler, internal/store's debounce and retry, the
// controllers/workqueue delays and token bucket), the messaging core
// (internal/messaging's deadlines and pickup grace) and the fake herdr
// (herdr/herdrsim's agent readiness, work, prompt and wait timers). Production
// passes [Real]; tests pass a [Fake] and script "ten minutes pass" without
// sleeping, or run on [Real] inside a testing/synctest bubble.
//
// A Clock makes two kinds of timer, as package time does: channel timers
// ([Clock.NewTimer]), which the controllers select on, and callbacks
// ([Clock.AfterFunc]), which the messaging core and the fake herdr use. A
// Fake moves only when its owner calls [Fake.Step] or [Fake.SetTime]; it
// runs due callbacks one by one in deadline order on the advancing goroutine,
// then fires due channel timers with the new time. [Fake.TimerAdded],
// [Fake.WaitForTimers] and [Fake.WaitIdle] let a test wait for a component
// to arm (or drop) its timers before it moves the clock.
//
// Nothing in this package sleeps or starts a goroutine, and it imports only
// the standard library and internal/notify (a Fake's TimerAdded and waits
// are notify.Signals; notify is a leaf too), so every layer may use it.
package clock
