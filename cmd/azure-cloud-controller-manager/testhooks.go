//go:build testhooks

package main

import "os"

// exitAfterPhase is the migration phase after which the CCM exits with status 3, named by the
// environment variable env: the e2e tests crash a migration at every phase this way and
// restart it. Only binaries built with -tags testhooks (make build, the race binaries of
// make test) read it; the images are built without.
func exitAfterPhase(env string) string { return os.Getenv(env) }
