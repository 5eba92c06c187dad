package feed

// Word lists the templates draw from. Team, city and country names are real so
// titles read like a venue's; people, films and parties are invented.

type named struct{ name, code string }

type league struct {
	name, code string
	teams      []named
	total      int    // a low game total, for over/under markets
	totalStep  int    // how far totals of different games spread
	margin     int    // a typical winning margin, for spread markets
	unit       string // what the total counts
	extra      string // one more outcome, e.g. "Draw"
}

var leagues = []league{
	{name: "NBA", code: "NBA", total: 210, totalStep: 5, margin: 10, unit: "points", extra: "Overtime", teams: []named{
		{"Lakers", "LAL"}, {"Celtics", "BOS"}, {"Warriors", "GSW"}, {"Knicks", "NYK"}, {"Bulls", "CHI"},
		{"Heat", "MIA"}, {"Nuggets", "DEN"}, {"Suns", "PHX"}, {"Bucks", "MIL"}, {"Mavericks", "DAL"},
		{"76ers", "PHI"}, {"Clippers", "LAC"},
	}},
	{name: "NFL", code: "NFL", total: 38, totalStep: 3, margin: 7, unit: "points", extra: "Overtime", teams: []named{
		{"Chiefs", "KC"}, {"Eagles", "PHI"}, {"Bills", "BUF"}, {"49ers", "SF"}, {"Cowboys", "DAL"},
		{"Ravens", "BAL"}, {"Packers", "GB"}, {"Lions", "DET"}, {"Bengals", "CIN"}, {"Dolphins", "MIA"},
	}},
	{name: "MLB", code: "MLB", total: 6, totalStep: 1, margin: 3, unit: "runs", extra: "Extra innings", teams: []named{
		{"Yankees", "NYY"}, {"Dodgers", "LAD"}, {"Red Sox", "BOS"}, {"Cubs", "CHC"}, {"Astros", "HOU"},
		{"Braves", "ATL"}, {"Mets", "NYM"}, {"Giants", "SF"}, {"Phillies", "PHI"}, {"Mariners", "SEA"},
	}},
	{name: "Premier League", code: "EPL", total: 1, totalStep: 1, margin: 2, unit: "goals", extra: "Draw", teams: []named{
		{"Arsenal", "ARS"}, {"Liverpool", "LIV"}, {"Chelsea", "CHE"}, {"Tottenham", "TOT"}, {"Newcastle", "NEW"},
		{"Aston Villa", "AVL"}, {"Manchester City", "MCI"}, {"Manchester United", "MUN"}, {"Brighton", "BHA"},
	}},
}

var states = []named{
	{"Georgia", "GA"}, {"Arizona", "AZ"}, {"Pennsylvania", "PA"}, {"Michigan", "MI"}, {"Nevada", "NV"},
	{"Wisconsin", "WI"}, {"Ohio", "OH"}, {"North Carolina", "NC"}, {"Virginia", "VA"}, {"Texas", "TX"},
	{"Florida", "FL"}, {"Colorado", "CO"},
}

var countries = []named{
	{"Germany", "DE"}, {"France", "FR"}, {"Japan", "JP"}, {"Canada", "CA"}, {"Italy", "IT"},
	{"Spain", "ES"}, {"the Netherlands", "NL"}, {"Australia", "AU"}, {"Brazil", "BR"}, {"India", "IN"},
}

var cities = []named{
	{"New York", "NY"}, {"Chicago", "CHI"}, {"Los Angeles", "LAX"}, {"Miami", "MIA"}, {"Denver", "DEN"},
	{"Austin", "AUS"}, {"Seattle", "SEA"}, {"Boston", "BOS"}, {"Philadelphia", "PHIL"}, {"Minneapolis", "MSP"},
}

var coins = []struct {
	name, code string
	base, step float64
}{
	{"Bitcoin", "BTC", 100000, 2500},
	{"Ethereum", "ETH", 4000, 100},
	{"Solana", "SOL", 200, 10},
	{"XRP", "XRP", 3, 1},
}

var missions = []struct{ agency, mission, code string }{
	{"NASA", "Artemis III", "ARTEMIS3"},
	{"SpaceX", "a crewed Starship flight", "STARSHIPCREW"},
	{"ESA", "the Ariel space telescope", "ARIEL"},
	{"ISRO", "the first crewed Gaganyaan mission", "GAGANYAAN"},
	{"Blue Origin", "a crewed New Glenn flight", "NEWGLENN"},
	{"JAXA", "the Martian Moons eXploration probe", "MMX"},
}

var firstNames = []string{
	"Maria", "James", "Dana", "Robert", "Aisha", "Daniel", "Elena", "Marcus", "Priya", "Thomas",
	"Grace", "Victor", "Sofia", "Henry", "Nadia", "Samuel", "Laura", "Owen", "Hannah", "Felix",
}

var lastNames = []string{
	"Alvarez", "Whitfield", "Okafor", "Brennan", "Castillo", "Lindqvist", "Harper", "Nakamura", "Delgado", "Foster",
	"Moreau", "Kowalski", "Patel", "Sullivan", "Romero", "Eriksen", "Bishop", "Calloway", "Vance", "Mercer",
}

var filmAdjectives = []string{"Silent", "Golden", "Last", "Hidden", "Broken", "Northern", "Paper", "Electric", "Velvet", "Distant"}

var filmNouns = []string{"Harbor", "Orchard", "Signal", "Kingdom", "River", "Summer", "Letters", "Horizon", "Garden", "Machine"}
