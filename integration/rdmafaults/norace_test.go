//go:build integration && !race

package rdmafaults

const raceEnabled = false
