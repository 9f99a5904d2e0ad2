// Package publish builds a command's output — a file, or a folder of
// files — under a temporary name beside its destination, and puts it at
// the destination by one rename once it is complete, so the destination
// is always absent or whole: never half a file, never a file that looks
// finished (a half-migrated store that checks clean with "0 runs").
//
// An Output lives in a hidden folder beside its destination,
// ".NAME.partial-RANDOM/", and is built at Output.Path inside it
// (".NAME.partial-RANDOM/NAME"). The folder holds a lock file whose lock
// (flock) its process keeps until the output is published or abandoned;
// the kernel drops it when the process dies, however it dies. So the
// leftovers of a process killed with SIGKILL are told from the outputs of
// live ones by the lock alone, and Begin removes them beside its own
// destination (Sweep): the next run cleans up after the killed one.
//
// Scratch makes the same locked folder for a process's own temporary
// files, never published: the lake stages an export's files in one.
//
// A Guard catches the stop signals (SIGINT, SIGTERM, SIGHUP) while a
// command builds its outputs: the first one removes every output the
// guard began that is not yet published, at once, and cancels the
// guard's context, so the command stops at its next check; an output
// removed so can no longer be published (ErrInterrupted). Publishing and
// that removal exclude each other, so a signal leaves each destination
// absent or whole. The second signal has its default effect (the process
// ends); the temporary outputs are gone by then, or left for the next run.
//
// Publish syncs the output before the rename (a file's data; a folder's
// entries: the files inside it are their writer's to sync) and the
// destination's folder after it, so a published output survives a power
// loss.
//
// A Guard is safe for concurrent use; an Output is used by one goroutine
// (but for the Guard's removal, which it excludes). The package keeps no
// state of its own.
package publish
