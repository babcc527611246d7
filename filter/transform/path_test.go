package transform

import "testing"

// pathEdgeCases exercise cleaning: roots, doubled and trailing slashes,
// "." and ".." segments at every position, relative paths climbing out.
var pathEdgeCases = []string{
	"", "/", "//", "///", ".", "..", "./", "../", ".//", "/.", "/..", "/./", "/../", "/../..", "a", "a/",
	"a//", "/a", "/a/", "a/b", "a/./b", "a/../b", "a/..", "a/../", "a/../..", "../a", "../../a", "../a/..",
	"../a/../..", "/a/b/../../..", "/a/b/../../../c", "./a", "a/.", "a/./", "...", ".../", "a/...",
	"..a", "a..", "/..a/", "a/b/c/../../d/./e//f/", "//a//b//", "/./a", "x/../../y/./z/", ".a/.b",
	"../../etc/passwd", "/var/www/../../etc/passwd", "a/b/", "a/b//", "./a/../b//c/./", "\\", "a\\b",
}

// winPathEdgeCases add backslashes, drive letters, data streams and
// trailing dots and spaces.
var winPathEdgeCases = append(append([]string{}, pathEdgeCases...),
	`\`, `\\`, `\\\`, `.\`, `..\`, `a\b`, `a\b\`, `\a\..\b`, `C:`, `C:\`, `C:/`, `c:\x`, `C:\Windows\..\x`,
	`..\..\win.ini`, `C:x`, `C:x:y`, `C::`, `C::x`, `1:x`, `ab:c`, `a:b`, `a:`, `:`, `::`, `:a`, `a::$DATA`,
	`f.txt::$DATA`, `dir\f.txt::$DATA`, `dir:x\f.txt`, `dir:x\f`, `d\f:s\`, `d\f:s/`, `C:\d\f.txt:s:t`,
	`/a:b/`, `/a:b`, `C:/a:b/`, `Z:a:b/`, `@:x`, `[:x`, "\xc3:x", `f.`, `f..`, `f .`, `f. `, `f. . `, `f `,
	` `, `  `, `. `, ` .`, `a/ /b`, `a/. /b`, `a/ ./b`, ` /a`, `a/ `, `a/ /`, `a/f./`, `a./b./c.`, `...`,
	`a/.../b`, `.../`, `C:. `, `C: `, `C:\f.txt.`, `C:\f.txt. `, `\\server\share\f.`, `f.txt.::$DATA`,
	`f.txt::$DATA.`, `f. :x`, `a:b.`, `a/ :x`, `C:\ \x`, `/ /`, `/. /`, `. /.`, `.. /..`, "a.\x00",
	`C:\inetpub\wwwroot\web.config::$DATA`, `C:\inetpub\wwwroot\web.config.`, `x\..\..\y.  `,
)

func TestNormalizePathEqualsBuiltin(t *testing.T) {
	equalOnCorpus(t, "normalizePath", pathEdgeCases...)
}

func TestNormalisePathEqualsBuiltin(t *testing.T) {
	equalOnCorpus(t, "normalisePath", pathEdgeCases...)
}

func FuzzNormalizePath(f *testing.F) { fuzzEqual(f, "normalizePath") }

func TestNormalizePathWinEqualsBuiltin(t *testing.T) {
	equalOnCorpus(t, "normalizePathWin", winPathEdgeCases...)
}

func TestNormalisePathWinEqualsBuiltin(t *testing.T) {
	equalOnCorpus(t, "normalisePathWin", winPathEdgeCases...)
}

func FuzzNormalizePathWin(f *testing.F) { fuzzEqual(f, "normalizePathWin") }
