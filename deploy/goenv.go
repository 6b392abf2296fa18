package deploy

import "os"

// makeBuildEnv is the environment of the go commands these checks run that compile: make
// build's settings (CGO_ENABLED=0, -trimpath), so that the packages they need come from the Go
// build cache that make build and the lint stage filled. With cgo on, a cold machine compiles
// the whole dependency tree once more for them.
func makeBuildEnv() []string {
	return append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-trimpath")
}
