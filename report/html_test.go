package report

import (
	"bytes"
	"testing"
)

func TestHTMLGolden(t *testing.T) {
	var b bytes.Buffer
	if err := HTML(&b, fixedCases(), Options{Version: "test", Title: "racetest demo"}); err != nil {
		t.Fatal(err)
	}
	golden(t, "report.html", b.Bytes())
}
