package starling_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when any goroutine outlives them: every
// Client.Close and Subscription.Close must leave nothing running.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
