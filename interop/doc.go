// Package interop holds tests, and nothing else, that run bots written
// with real frameworks in other languages against the tgrelay binary:
// grammY 1.x and Telegraf 4.16 (Node.js), by long polling against
// `tgrelay sandbox` and behind `tgrelay serve` (serve polls the sandbox and
// forwards each update to the bot's webhook handler).
//
// The bots live in testdata/bots (package.json and package-lock.json pin
// the frameworks). The tests need node and npm:
//
//   - TGRELAY_NODE_MODULES names a directory whose node_modules holds the
//     locked packages (.ci/run installs them there with npm ci, once);
//   - otherwise the tests run npm ci themselves into the user cache
//     directory (tgrelay-interop/<hash of the lock file>), once per lock.
//
// Without node or npm, or when the install fails (offline), the tests skip
// with a loud message — unless TGRELAY_REQUIRE_NODE=1, which .ci/run sets,
// so CI can never skip them silently.
package interop
