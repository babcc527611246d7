package transform

import "testing"

// commentEdgeCases exercise every marker at the start, the middle and the
// end of a value, cut short, doubled, overlapping and nested.
var commentEdgeCases = []string{
	"", "/", "*", "/*", "*/", "/**/", "/*/", "/**", "**/", "/*a", "a/*", "a/*b", "a/*b*/c", "a/*b*/",
	"/*a*/b", "/*a*//*b*/", "/*a*/*/", "/*/*/*/", "a*/b", "/*a/*b*/c*/d", "/**//", "/*x*/#", "/*x*/--",
	"/*x*/-->", "/*x*/<!--y-->z", "/* x -->y", "<!-- x */y", "<", "<!", "<!-", "<!--", "<!--x", "<!---->",
	"<!--x-->", "a<!--b-->c", "<!--a-->", "-", "--", "-->", "->", "a--b", "a-b", "a---b", "a-->b", "--->",
	"#", "a#b", "a #b", "##", "#/*", "-- /*", "/*--*/x", "/*#*/x", "/*x-->", "/*x--", "/*x->y", "/*x-- >y",
	"/*x*", "/*x*/", "/*x*/y", "/*x*/\x00", "<!--x*/", "<!--x-->y", "<!--x--", "1 UNION/**/SELECT",
	"1/*!50000UNION*/SELECT", "SELECT 1 -- x", "SELECT 1 # x", "a/*b*/c/*d", "*/*", "*//*", "/*/**/",
	"<!<!--", "<<!--x-->", "-<!--x-->", "---", "----", "-->-->", "<!---->-->", "/*-->*/x", "/*<!--*/x",
}

func TestReplaceCommentsEqualsBuiltin(t *testing.T) {
	equalOnCorpus(t, "replaceComments", commentEdgeCases...)
}

func FuzzReplaceComments(f *testing.F) { fuzzEqual(f, "replaceComments") }

func TestRemoveCommentsCharEqualsBuiltin(t *testing.T) {
	equalOnCorpus(t, "removeCommentsChar", commentEdgeCases...)
}

func FuzzRemoveCommentsChar(f *testing.F) { fuzzEqual(f, "removeCommentsChar") }

func TestRemoveCommentsEqualsBuiltin(t *testing.T) {
	equalOnCorpus(t, "removeComments", commentEdgeCases...)
}

func FuzzRemoveComments(f *testing.F) { fuzzEqual(f, "removeComments") }
