package benchreq

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// Class is the kind of a request in the traffic mix.
type Class int

// The classes of the mix. The attack classes are reported together as
// "attack"; AttackKinds tells them apart in the pool.
const (
	BenignGET Class = iota
	BenignJSON
	Attack
	NumClasses
)

// String returns the class name used in reports.
func (c Class) String() string {
	switch c {
	case BenignGET:
		return "benign_get"
	case BenignJSON:
		return "benign_json"
	case Attack:
		return "attack"
	}
	return "class(" + strconv.Itoa(int(c)) + ")"
}

// Benign reports whether requests of the class must pass.
func (c Class) Benign() bool { return c != Attack }

// Host is the Host header of every request. A name, not an address: CRS rule
// 920350 scores a numeric Host.
const Host = "shop.example.com"

// Mix is the share of each class in a pool, in percent.
type Mix struct {
	GET, JSON, Attack int
}

// DefaultMix is 70% benign GETs, 20% benign JSON POSTs, 10% attacks.
var DefaultMix = Mix{GET: 70, JSON: 20, Attack: 10}

// Pool is a deterministic list of requests in the order they are sent.
type Pool struct {
	Seed     uint64
	Requests []Request
	index    map[string]int
}

// NewPool generates n requests with the given mix from seed. The same seed,
// size and mix give the same pool, byte for byte. Class counts are exact
// (rounded down for the benign classes, the rest goes to GET), and the order
// is a seeded shuffle.
func NewPool(seed uint64, n int, mix Mix) (*Pool, error) {
	if n < 10 {
		return nil, fmt.Errorf("pool size: got %d, want at least 10", n)
	}
	if mix.GET < 0 || mix.JSON < 0 || mix.Attack < 0 || mix.GET+mix.JSON+mix.Attack != 100 {
		return nil, fmt.Errorf("mix: got %d/%d/%d, want three non-negative shares that add up to 100", mix.GET, mix.JSON, mix.Attack)
	}
	g := &gen{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	nJSON := n * mix.JSON / 100
	nAttack := n * mix.Attack / 100
	nGET := n - nJSON - nAttack
	p := &Pool{Seed: seed, index: make(map[string]int, n)}
	for i := 0; i < nGET; i++ {
		p.Requests = append(p.Requests, g.benignGET())
	}
	for i := 0; i < nJSON; i++ {
		p.Requests = append(p.Requests, g.benignJSON())
	}
	attackKinds := []func() Request{g.sqliQuery, g.xssQuery, g.sqliJSON, g.xssJSON}
	for i := 0; i < nAttack; i++ {
		p.Requests = append(p.Requests, attackKinds[i%len(attackKinds)]())
	}
	g.r.Shuffle(len(p.Requests), func(i, j int) { p.Requests[i], p.Requests[j] = p.Requests[j], p.Requests[i] })
	// Each target carries a distinct request counter, so keys are unique by
	// construction; the check guards against later edits.
	for i := range p.Requests {
		r := &p.Requests[i]
		r.Name, r.WantStatus = r.Class.String(), 200
		if !r.Class.Benign() {
			r.WantStatus = 403
		}
		sep := "?"
		if strings.Contains(r.Path, "?") {
			sep = "&"
		}
		r.Path += sep + "_=" + strconv.FormatInt(1764400000000+int64(i)*7919, 10)
		if _, dup := p.index[r.Key()]; dup {
			return nil, fmt.Errorf("pool: duplicate request %q", r.Key())
		}
		p.index[r.Key()] = i
	}
	return p, nil
}

// Lookup returns the index of the request with the given method and URL
// (absolute or target only), or -1.
func (p *Pool) Lookup(method, rawURL string) int {
	target := rawURL
	if i := strings.Index(rawURL, "://"); i >= 0 {
		if j := strings.IndexByte(rawURL[i+3:], '/'); j >= 0 {
			target = rawURL[i+3+j:]
		}
	}
	if i, ok := p.index[method+" "+target]; ok {
		return i
	}
	return -1
}

// Counts returns how many requests of each class the pool holds.
func (p *Pool) Counts() [NumClasses]int {
	var c [NumClasses]int
	for i := range p.Requests {
		c[p.Requests[i].Class]++
	}
	return c
}

// JSONBytes returns the total and the smallest and largest JSON body size.
func (p *Pool) JSONBytes() (total, lo, hi int) {
	lo = -1
	for i := range p.Requests {
		n := len(p.Requests[i].Body)
		if n == 0 {
			continue
		}
		total += n
		if lo < 0 || n < lo {
			lo = n
		}
		hi = max(hi, n)
	}
	return total, max(lo, 0), hi
}

type gen struct {
	r *rand.Rand
}

func (g *gen) pick(s []string) string { return s[g.r.IntN(len(s))] }

func (g *gen) between(lo, hi int) int { return lo + g.r.IntN(hi-lo+1) }

func (g *gen) hex(n int) string {
	const digits = "0123456789abcdef"
	b := make([]byte, n)
	for i := range b {
		b[i] = digits[g.r.IntN(16)]
	}
	return string(b)
}

var (
	userAgents = []string{
		"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
		"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Safari/605.1.15",
		"Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0",
		"Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1",
		"Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Mobile Safari/537.36",
		"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 Edg/131.0.0.0",
	}
	languages  = []string{"en-US,en;q=0.9", "de-DE,de;q=0.9,en;q=0.8", "fr-FR,fr;q=0.9,en-US;q=0.8,en;q=0.7", "en-GB,en;q=0.9", "es-ES,es;q=0.9"}
	categories = []string{"shoes", "jackets", "shirts", "trousers", "bags", "hats", "socks", "dresses", "watches", "outdoor"}
	colors     = []string{"black", "white", "navy", "red", "green", "grey", "beige", "olive", "blue"}
	sizes      = []string{"xs", "s", "m", "l", "xl", "38", "40", "42", "44"}
	sorts      = []string{"relevance", "price_asc", "price_desc", "newest", "rating"}
	adjectives = []string{"soft", "light", "warm", "classic", "slim", "relaxed", "waterproof", "breathable", "organic", "recycled", "casual", "durable"}
	nouns      = []string{"jacket", "sneaker", "boot", "shirt", "sweater", "backpack", "scarf", "cap", "chino", "parka", "hoodie", "sandal"}
	materials  = []string{"cotton", "wool", "linen", "leather", "denim", "merino", "nylon", "canvas"}
	firstNames = []string{"Anna", "Lukas", "Marie", "Jonas", "Sofia", "Noah", "Emma", "Liam", "Mia", "Elias", "Lena", "Paul"}
	lastNames  = []string{"Schmidt", "Garcia", "Martin", "Rossi", "Novak", "Jensen", "Dubois", "Silva", "Keller", "Nowak"}
	streets    = []string{"Hauptstrasse", "Market Street", "Rue des Lilas", "Calle Mayor", "Via Roma", "Oak Avenue", "Station Road"}
	cities     = []string{"Berlin", "Lyon", "Madrid", "Milan", "Leeds", "Portland", "Vienna", "Porto"}
	countries  = []string{"DE", "FR", "ES", "IT", "GB", "US", "AT", "PT"}
	sources    = []string{"newsletter", "google", "instagram", "partner", "direct"}
	mediums    = []string{"email", "cpc", "social", "referral"}
	campaigns  = []string{"winter_sale", "new_arrivals", "black_friday", "spring_collection"}
	pages      = []string{"/", "/shop/products", "/shop/category", "/search", "/shop/product", "/blog/article", "/account/orders", "/help/shipping"}
	fillWords  = []string{"comfortable", "fit", "everyday", "wear", "easy", "care", "machine", "washable", "made", "with", "fabric", "lining", "pockets", "zip", "colour", "true", "size", "lasting", "quality", "gift", "season", "style", "walking", "travel", "weekend", "office"}
)

func (g *gen) productName() string {
	return g.pick(adjectives) + " " + g.pick(materials) + " " + g.pick(nouns)
}

func (g *gen) slug() string {
	return strings.ReplaceAll(g.productName(), " ", "-") + "-" + strconv.Itoa(g.between(1000, 99999))
}

func (g *gen) sentence(words int) string {
	w := make([]string, words)
	for i := range w {
		w[i] = g.pick(fillWords)
	}
	s := strings.Join(w, " ")
	return strings.ToUpper(s[:1]) + s[1:] + "."
}

func (g *gen) browserHeader(accept string) http.Header {
	h := http.Header{}
	h.Set("Host", Host)
	h.Set("User-Agent", g.pick(userAgents))
	h.Set("Accept", accept)
	h.Set("Accept-Language", g.pick(languages))
	h.Set("Accept-Encoding", "gzip, deflate, br")
	h.Set("Referer", "https://"+Host+g.pick(pages))
	h.Set("Cookie", fmt.Sprintf("session_id=%s; cart_items=%d; theme=%s; _ga=GA1.2.%d.%d",
		g.hex(32), g.between(0, 9), g.pick([]string{"light", "dark"}), g.between(100000000, 999999999), g.between(1600000000, 1760000000)))
	return h
}

func (g *gen) pageHeader() http.Header {
	h := g.browserHeader("text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8")
	h.Set("Upgrade-Insecure-Requests", "1")
	h.Set("Sec-Fetch-Dest", "document")
	h.Set("Sec-Fetch-Mode", "navigate")
	h.Set("Sec-Fetch-Site", "same-origin")
	h.Set("Sec-Fetch-User", "?1")
	return h
}

func (g *gen) apiHeader() http.Header {
	h := g.browserHeader("application/json")
	h.Set("Content-Type", "application/json")
	h.Set("Origin", "https://"+Host)
	h.Set("Sec-Fetch-Dest", "empty")
	h.Set("Sec-Fetch-Mode", "cors")
	h.Set("Sec-Fetch-Site", "same-origin")
	h.Set("X-Request-ID", g.hex(8)+"-"+g.hex(4)+"-"+g.hex(4)+"-"+g.hex(4)+"-"+g.hex(12))
	return h
}

// benignQuery returns a URL and its query with 2 to 7 ordinary parameters.
func (g *gen) benignQuery() (string, url.Values) {
	q := url.Values{}
	var path string
	switch g.r.IntN(5) {
	case 0:
		path = "/search"
		q.Set("q", g.pick(colors)+" "+g.pick(materials)+" "+g.pick(nouns))
	case 1:
		path = "/shop/category/" + g.pick(categories)
	case 2:
		path = "/shop/product/" + g.slug()
	case 3:
		path = "/api/v1/products"
		q.Set("category", g.pick(categories))
		q.Set("limit", strconv.Itoa(g.pick2(24, 48)))
	default:
		path = "/blog/" + strings.ReplaceAll(g.sentence(4), " ", "-")
		path = strings.TrimSuffix(strings.ToLower(path), ".")
	}
	optional := []func(){
		func() { q.Set("page", strconv.Itoa(g.between(1, 40))) },
		func() { q.Set("sort", g.pick(sorts)) },
		func() { q.Set("color", g.pick(colors)) },
		func() { q.Set("size", g.pick(sizes)) },
		func() {
			lo := g.between(1, 20) * 5
			q.Set("price_min", strconv.Itoa(lo))
			q.Set("price_max", strconv.Itoa(lo+g.between(2, 40)*5))
		},
		func() {
			q.Set("utm_source", g.pick(sources))
			q.Set("utm_medium", g.pick(mediums))
			q.Set("utm_campaign", g.pick(campaigns))
		},
		func() { q.Set("lang", g.pick([]string{"en", "de", "fr", "es", "it"})) },
		func() { q.Set("currency", g.pick([]string{"EUR", "USD", "GBP"})) },
		func() { q.Set("in_stock", g.pick([]string{"true", "false"})) },
		func() { q.Set("ref", "home_carousel_"+strconv.Itoa(g.between(1, 12))) },
	}
	for n := g.between(1, 5); n > 0; n-- {
		optional[g.r.IntN(len(optional))]()
	}
	return path, q
}

func (g *gen) pick2(a, b int) int {
	if g.r.IntN(2) == 0 {
		return a
	}
	return b
}

func (g *gen) benignGET() Request {
	path, q := g.benignQuery()
	target := path
	if len(q) > 0 {
		target += "?" + q.Encode()
	}
	return Request{Class: BenignGET, Kind: "get", Method: http.MethodGet, Path: target, Headers: headerPairs(g.pageHeader())}
}

func (g *gen) person() map[string]any {
	first, last := g.pick(firstNames), g.pick(lastNames)
	return map[string]any{
		"first_name": first,
		"last_name":  last,
		"email":      strings.ToLower(first+"."+last) + strconv.Itoa(g.between(1, 99)) + "@example.com",
		"phone":      fmt.Sprintf("+%d %d %d", g.between(30, 49), g.between(20, 89), g.between(1000000, 9999999)),
	}
}

func (g *gen) address() map[string]any {
	return map[string]any{
		"line1":       g.pick(streets) + " " + strconv.Itoa(g.between(1, 250)),
		"line2":       "Apartment " + strconv.Itoa(g.between(1, 40)),
		"city":        g.pick(cities),
		"postal_code": strconv.Itoa(g.between(10000, 99999)),
		"country":     g.pick(countries),
	}
}

func (g *gen) item() map[string]any {
	price := g.between(500, 25000)
	return map[string]any{
		"sku":         strings.ToUpper(g.hex(4)) + "-" + strconv.Itoa(g.between(100, 999)),
		"name":        g.productName(),
		"description": g.sentence(g.between(12, 24)),
		"quantity":    g.between(1, 4),
		"unit_price":  map[string]any{"amount": float64(price) / 100, "currency": "EUR"},
		"attributes":  map[string]any{"color": g.pick(colors), "size": g.pick(sizes), "material": g.pick(materials)},
		"gift_wrap":   g.r.IntN(5) == 0,
	}
}

func (g *gen) order(size int) map[string]any {
	o := map[string]any{
		"order_id":   "ord_" + g.hex(16),
		"created_at": fmt.Sprintf("2026-%02d-%02dT%02d:%02d:%02dZ", g.between(1, 12), g.between(1, 28), g.between(0, 23), g.between(0, 59), g.between(0, 59)),
		"customer":   map[string]any{"id": g.between(10000, 999999), "contact": g.person(), "loyalty_tier": g.pick([]string{"bronze", "silver", "gold"})},
		"shipping": map[string]any{
			"address": g.address(),
			"method":  g.pick([]string{"standard", "express", "pickup"}),
			"notes":   g.sentence(g.between(6, 12)),
		},
		"billing": map[string]any{"address": g.address(), "same_as_shipping": false},
		"payment": map[string]any{"method": "card", "brand": g.pick([]string{"visa", "mastercard", "amex"}), "last4": strconv.Itoa(g.between(1000, 9999)), "expiry_month": g.between(1, 12), "expiry_year": g.between(2027, 2031)},
		"totals":  map[string]any{"currency": "EUR", "discount": 0, "shipping": 4.95},
	}
	var items []any
	for jsonSize(o) < size {
		items = append(items, g.item())
		o["items"] = items
	}
	return o
}

func (g *gen) profile(size int) map[string]any {
	p := map[string]any{
		"user_id": g.between(10000, 999999),
		"contact": g.person(),
		"preferences": map[string]any{
			"language":             g.pick([]string{"en", "de", "fr", "es"}),
			"currency":             g.pick([]string{"EUR", "USD", "GBP"}),
			"newsletter":           g.r.IntN(2) == 0,
			"sizes":                map[string]any{"shirt": g.pick(sizes), "shoe": strconv.Itoa(g.between(36, 46))},
			"favourite_categories": []any{g.pick(categories), g.pick(categories), g.pick(categories)},
		},
		"notifications": map[string]any{"email": true, "sms": false, "push": g.r.IntN(2) == 0},
		"about":         g.sentence(g.between(10, 20)),
	}
	var addresses, history []any
	for jsonSize(p) < size {
		if g.r.IntN(4) == 0 {
			a := g.address()
			a["label"] = g.pick([]string{"home", "work", "parents"})
			addresses = append(addresses, a)
			p["addresses"] = addresses
			continue
		}
		history = append(history, map[string]any{
			"order_id": "ord_" + g.hex(16),
			"date":     fmt.Sprintf("2025-%02d-%02d", g.between(1, 12), g.between(1, 28)),
			"status":   g.pick([]string{"delivered", "shipped", "returned"}),
			"total":    float64(g.between(1000, 40000)) / 100,
			"items":    []any{map[string]any{"name": g.productName(), "review": g.sentence(g.between(8, 16))}},
		})
		p["order_history"] = history
	}
	return p
}

func jsonSize(v any) int { return len(mustJSON(v)) }

// mustJSON encodes v the way browsers' JSON.stringify does: without escaping
// <, > and & (encoding/json escapes them by default).
func mustJSON(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err) // maps of strings, numbers and bools always encode
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// benignJSONDoc returns an API path and a 5 to 25 KB document.
func (g *gen) benignJSONDoc() (string, string, map[string]any) {
	size := g.between(5*1024, 25*1024-600) // items add up to ~600 bytes past the target
	if g.r.IntN(3) == 0 {
		return "json_profile", "/api/v1/account/profile", g.profile(size)
	}
	return "json_order", "/api/v1/orders", g.order(size)
}

func (g *gen) benignJSON() Request {
	kind, path, doc := g.benignJSONDoc()
	h := g.apiHeader()
	body := mustJSON(doc)
	return Request{Class: BenignJSON, Kind: kind, Method: http.MethodPost, Path: path, Headers: bodyHeaders(h, body), Body: body}
}

var (
	sqliPayloads = []string{
		"1' OR '1'='1",
		"1 UNION SELECT username, password FROM users--",
		"1'; DROP TABLE orders; --",
		"1' AND SLEEP(5)--",
		"' OR 1=1 LIMIT 1 -- -",
		"1) UNION ALL SELECT NULL,NULL,@@version#",
	}
	xssPayloads = []string{
		"<script>alert(document.cookie)</script>",
		"<img src=x onerror=alert(1)>",
		"<svg/onload=alert('xss')>",
		"\"><script src=https://evil.example/x.js></script>",
		"<iframe src=\"javascript:alert(1)\"></iframe>",
		"<body onload=alert(document.domain)>",
	}
)

func (g *gen) queryAttack(kind string, payloads []string) Request {
	path, q := g.benignQuery()
	param := g.pick([]string{"q", "id", "category", "ref", "sort"})
	q.Set(param, g.pick(payloads))
	return Request{Class: Attack, Kind: kind, Method: http.MethodGet, Path: path + "?" + q.Encode(), Headers: headerPairs(g.pageHeader())}
}

func (g *gen) sqliQuery() Request { return g.queryAttack("sqli_query", sqliPayloads) }
func (g *gen) xssQuery() Request  { return g.queryAttack("xss_query", xssPayloads) }

func (g *gen) jsonAttack(kind string, payloads []string) Request {
	_, path, doc := g.benignJSONDoc()
	payload := g.pick(payloads)
	if c, ok := doc["contact"].(map[string]any); ok {
		c["first_name"] = payload
	} else {
		doc["coupon_code"] = payload
	}
	h := g.apiHeader()
	body := mustJSON(doc)
	return Request{Class: Attack, Kind: kind, Method: http.MethodPost, Path: path, Headers: bodyHeaders(h, body), Body: body}
}

func (g *gen) sqliJSON() Request { return g.jsonAttack("sqli_json", sqliPayloads) }
func (g *gen) xssJSON() Request  { return g.jsonAttack("xss_json", xssPayloads) }

// bodyHeaders is headerPairs with the Content-Length of body, which every
// HTTP/1.1 client sends with a body it knows the size of (the bench's
// client writes its own from the body; net/http leaves this one out), so
// that a benchmark that hands the request to the plugin directly gives it
// the headers a proxy would. Without it, the CRS counts each POST as one
// without Content-Length and Transfer-Encoding (920180) and logs it.
func bodyHeaders(h http.Header, body []byte) [][2]string {
	h.Set("Content-Length", strconv.Itoa(len(body)))
	return headerPairs(h)
}

// headerPairs turns a generated header set into the pool's form: lower-case
// names in name order, without Host (the drivers send it as :authority,
// HTTPHeader adds it back).
func headerPairs(h http.Header) [][2]string {
	names := make([]string, 0, len(h))
	for k := range h {
		if !strings.EqualFold(k, "Host") {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	var out [][2]string
	for _, k := range names {
		for _, v := range h[k] {
			out = append(out, [2]string{strings.ToLower(k), v})
		}
	}
	return out
}
