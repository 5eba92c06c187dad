package feed

// Word lists the templates draw from. Team, city and country names are real so
// titles read like a venue's; people, films and parties are invented.

type named struct{ name, code string }

type league struct {
	name, code string
	teams      []named
	total      int    // a typical game total, for over/under markets
	totalStep  int    // how far totals of different games spread
	margin     int    // a comfortable winning margin, for margin markets
	unit       string // what the total counts
	draws      bool   // a game can end in a draw
}

var leagues = []league{
	{name: "NBA", code: "NBA", total: 225, totalStep: 6, margin: 10, unit: "points", teams: []named{
		{"Lakers", "LAL"}, {"Celtics", "BOS"}, {"Warriors", "GSW"}, {"Knicks", "NYK"}, {"Bulls", "CHI"},
		{"Heat", "MIA"}, {"Nuggets", "DEN"}, {"Suns", "PHX"}, {"Bucks", "MIL"}, {"Mavericks", "DAL"},
		{"76ers", "PHI"}, {"Clippers", "LAC"},
	}},
	{name: "NFL", code: "NFL", total: 44, totalStep: 3, margin: 7, unit: "points", teams: []named{
		{"Chiefs", "KC"}, {"Eagles", "PHI"}, {"Bills", "BUF"}, {"49ers", "SF"}, {"Cowboys", "DAL"},
		{"Ravens", "BAL"}, {"Packers", "GB"}, {"Lions", "DET"}, {"Bengals", "CIN"}, {"Dolphins", "MIA"},
	}},
	{name: "MLB", code: "MLB", total: 8, totalStep: 1, margin: 3, unit: "runs", teams: []named{
		{"Yankees", "NYY"}, {"Dodgers", "LAD"}, {"Red Sox", "BOS"}, {"Cubs", "CHC"}, {"Astros", "HOU"},
		{"Braves", "ATL"}, {"Mets", "NYM"}, {"Giants", "SF"}, {"Phillies", "PHI"}, {"Mariners", "SEA"},
	}},
	{name: "Premier League", code: "EPL", total: 2, totalStep: 1, margin: 2, unit: "goals", draws: true, teams: []named{
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

// city is a city with its climate: the normal daily high (°F) and the mean
// snowfall (inches) of each month, January first (NOAA 1991–2020 normals,
// rounded), so weather markets ask about what can happen there and then.
type city struct {
	name, code string
	highF      [12]float64
	snowIn     [12]float64
}

var cities = []city{
	{"New York", "NY", [12]float64{39, 42, 50, 62, 72, 80, 85, 84, 76, 65, 54, 44}, [12]float64{8.8, 10.1, 5, 0.4, 0, 0, 0, 0, 0, 0, 0.5, 4.8}},
	{"Chicago", "CHI", [12]float64{32, 36, 47, 59, 70, 80, 84, 82, 75, 62, 48, 36}, [12]float64{11.3, 10.7, 5.6, 1.3, 0, 0, 0, 0, 0, 0.2, 1.8, 7.6}},
	{"Los Angeles", "LAX", [12]float64{68, 69, 70, 72, 74, 78, 83, 84, 83, 79, 73, 68}, [12]float64{}},
	{"Miami", "MIA", [12]float64{76, 78, 80, 83, 87, 89, 91, 91, 89, 86, 82, 78}, [12]float64{}},
	{"Denver", "DEN", [12]float64{45, 47, 55, 61, 71, 82, 89, 87, 79, 66, 53, 45}, [12]float64{6.6, 7.3, 11.4, 8.8, 1.3, 0, 0, 0, 1, 4, 8.5, 8.6}},
	{"Austin", "AUS", [12]float64{62, 66, 73, 80, 87, 93, 96, 97, 91, 82, 71, 63}, [12]float64{}},
	{"Seattle", "SEA", [12]float64{48, 50, 54, 59, 65, 70, 76, 77, 71, 60, 51, 46}, [12]float64{2.1, 1.5, 0.4, 0, 0, 0, 0, 0, 0, 0, 0.6, 1.8}},
	{"Boston", "BOS", [12]float64{37, 39, 46, 57, 67, 77, 82, 81, 73, 62, 52, 42}, [12]float64{12.9, 10.9, 7.8, 1.9, 0, 0, 0, 0, 0, 0.2, 1.3, 9}},
	{"Philadelphia", "PHIL", [12]float64{41, 44, 53, 64, 74, 83, 87, 86, 79, 67, 56, 45}, [12]float64{7.1, 8.5, 3.3, 0.3, 0, 0, 0, 0, 0, 0, 0.3, 3.4}},
	{"Minneapolis", "MSP", [12]float64{23, 28, 41, 57, 69, 79, 83, 80, 72, 58, 41, 27}, [12]float64{10.9, 8.6, 9.5, 3.4, 0, 0, 0, 0, 0, 0.6, 9.3, 11.6}},
}

var coins = []struct {
	name, code string
	base, step float64
}{
	{"Bitcoin", "BTC", 100000, 2500},
	{"Ethereum", "ETH", 4000, 100},
	{"Solana", "SOL", 200, 10},
	{"XRP", "XRP", 3, 0.1},
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

var speakers = []struct{ who, occasion, code string }{
	{"the President", "press conference", "POTUS"},
	{"the Fed chair", "FOMC press conference", "FEDCHAIR"},
	{"the Treasury Secretary", "Senate hearing", "TREAS"},
	{"the Secretary of State", "press briefing", "SECSTATE"},
}

var mentionWords = []string{
	"Tariff", "Inflation", "Recession", "Bitcoin", "China", "Artificial intelligence", "Border",
	"Housing", "Jobs", "Deficit", "Ukraine", "Energy", "Oil", "Interest rates", "Stock market",
}
