// Package statedbtest is the state database's test double: a file layer
// (statedb.Options.Wrap) whose writes fail on demand, for the tests of the
// packages that keep their records in the database.
//
// Tests only: fleetd never links it. It never writes or reads a file of
// its own.
package statedbtest
