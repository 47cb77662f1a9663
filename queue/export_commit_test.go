package queue

// commit.lua's argument strides, for the external tests that count the
// runs each commit call carries.
const (
	CommitHeaderArgs = commitHeaderArgs
	CommitPlanArgs   = commitPlanArgs
	CommitRunArgs    = commitRunArgs
)
