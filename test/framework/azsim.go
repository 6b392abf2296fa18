package framework

import (
	"context"
	"errors"
)

// startAzure starts azsim in-process. The azsim server package has not landed yet.
func startAzure(ctx context.Context, dir string) (*Azure, error) {
	return nil, errors.New("azsim is not available yet: run with Options.NoAzure")
}
