// Package gitrepotest makes throwaway git repositories for tests: a
// repository with one commit ([Repo]), commits ([Commit]), files
// ([Write]) and git commands whose failure fails the test ([Git]). It runs
// the system git in a hermetic environment (no global or system
// configuration, a fixed identity, [Env]).
//
// It is imported by tests only, never by fleetd's own code; Repo makes its
// repository in the test's temporary directory, and the other functions
// act only on the directories a test gives them.
package gitrepotest
