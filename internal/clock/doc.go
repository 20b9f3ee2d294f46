// Package clock is the time source the controllers take instead of reading
// the wall clock: Real for production and Fake for tests that script "ten
// minutes pass" without sleeping.
//
// A Fake moves only when its owner calls Step or SetTime; it fires every timer
// whose deadline has been reached, in deadline order. Nothing in this package
// ever sleeps or starts a goroutine.
package clock
