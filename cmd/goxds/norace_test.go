//go:build !race

package main

// raceEnabled: the tests run under -race, and so does the tool they build.
const raceEnabled = false
