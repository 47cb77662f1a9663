package nanobot_test

import (
	"fmt"

	"github.com/chronos-sched/chronos/api/crontool/nanobot"
)

// A jobs.json with keys left out reads with nanobot's defaults and is
// written back as nanobot's Python writer writes it.
func Example() {
	f, err := nanobot.Decode([]byte(`{"jobs": [{"id": "a1b2c3d4", "name": "Water",
		"schedule": {"kind": "every", "everyMs": 7200000}, "payload": {"message": "Drink water 💧"}}]}`))
	if err != nil {
		panic(err)
	}
	fmt.Println(string(nanobot.Encode(f)))
	// Output:
	// {
	//   "version": 1,
	//   "jobs": [
	//     {
	//       "id": "a1b2c3d4",
	//       "name": "Water",
	//       "enabled": true,
	//       "schedule": {
	//         "kind": "every",
	//         "atMs": null,
	//         "everyMs": 7200000,
	//         "expr": null,
	//         "tz": null
	//       },
	//       "payload": {
	//         "kind": "agent_turn",
	//         "message": "Drink water 💧",
	//         "deliver": false,
	//         "channel": null,
	//         "to": null
	//       },
	//       "state": {
	//         "nextRunAtMs": null,
	//         "lastRunAtMs": null,
	//         "lastStatus": null,
	//         "lastError": null
	//       },
	//       "createdAtMs": 0,
	//       "updatedAtMs": 0,
	//       "deleteAfterRun": false
	//     }
	//   ]
	// }
}
