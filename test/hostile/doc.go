// Command hostile plays issue 24's attacks on a running fleetd binary and
// prints, for each, fleetd's resident memory (before, and at its peak while
// the attack lasts) and the latency of /healthz meanwhile (a probe every
// 50 ms with its own connection, each bounded by 5 s), with what the attack
// achieved:
//
//  1. slow bodies: 520 connections that announce a 200 KB body and send two
//     bytes, renewed as fleetd closes them — without a token, and with a
//     worker's;
//  2. held waits: 520 GET /inbox?wait=true from one worker token, each
//     tried again as soon as it is refused;
//  3. SSE injection: worker replies ending in bare CRs, one forging the
//     "gone" event, then the console's live overview as a browser's
//     EventSource reads it;
//  4. console amplification: 1.25 MB of replies from one worker, the
//     overview's size, and 32 console streams nobody reads while the fleet
//     changes;
//  5. log follows: one worker follows its own terminal 32 times, then the
//     primary follows one;
//  6. state-directory files: fleetd started with a FIFO at an ownership
//     record, and with a symbolic link to /dev/zero at the message journal
//     (stopped once it passes 512 MiB);
//  7. a 1.5 MB annotation: a manifest that carries one, and a member watch
//     read with `fleetd get -w`'s 4 MiB bound.
//
// Each attack gets a fresh fleetd: `FLEETD serve --herdr-socket` against a
// simulated herdr in this process — the same simulation `--herdr=sim`
// embeds — because a worker's token is only in its pane's environment,
// which the simulation shows this process and nobody else. It never
// changes anything outside the temporary directories it creates.
//
//	go build -o bin/fleetd ./cmd/fleetd
//	go run ./test/hostile -fleetd bin/fleetd
package main
