package api

import (
	"testing"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"github.com/google/uuid"
)

func TestProbe(t *testing.T) {
	_ = echo.New()
	_ = middleware.BodyLimit
	_ = prometheus.NewRegistry()
	_ = testutil.ToFloat64
	require.True(t, true)
	_ = goleak.VerifyNone
	_ = uuid.New
}
