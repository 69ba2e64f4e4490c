"""The vocabulary of the synthetic retrieval set (:mod:`benchmarks.retrieval_data`): the slot
values a user's facts are drawn from, each fact category's statement templates, question
templates (by style), confusers and acknowledgement, and the small talk around them."""

from __future__ import annotations

__all__ = [
    "NAMES",
    "CITIES",
    "ANIMALS",
    "PETS",
    "ALLERGENS",
    "JOBS",
    "CARS",
    "INSTRUMENTS",
    "TRIPS",
    "DATES",
    "DIETS",
    "PROJECTS",
    "DOCTORS",
    "TIMES",
    "WEEKDAYS",
    "BOOKS",
    "KIDS",
    "SCHOOLS",
    "CATEGORIES",
    "SMALL_TALK",
    "ASSISTANT_SMALL",
]

NAMES = [
    "Ingrid",
    "Tomasz",
    "Priya",
    "Mateo",
    "Yuki",
    "Aisha",
    "Lars",
    "Chiara",
    "Kwame",
    "Elif",
    "Dmitri",
    "Sofia",
    "Ravi",
    "Noor",
    "Henrik",
    "Lucia",
    "Oskar",
    "Mei",
    "Tariq",
    "Greta",
]
CITIES = [
    "Lisbon",
    "Reykjavik",
    "Montreal",
    "Osaka",
    "Nairobi",
    "Valparaiso",
    "Tallinn",
    "Porto",
    "Hobart",
    "Ljubljana",
    "Cartagena",
    "Bergen",
]
ANIMALS = [("kitten", "grey"), ("puppy", "brown"), ("rabbit", "white"), ("parrot", "green"), ("tortoise", "tiny")]
PETS = ["Pixel", "Biscuit", "Nimbus", "Pickle", "Juniper", "Waffles", "Mochi", "Ziggy"]
ALLERGENS = ["peanuts", "shellfish", "sesame", "kiwi", "mustard", "celery"]
JOBS = [
    ("data analyst", "Northwind"),
    ("nurse", "St Brendan's"),
    ("UX designer", "Fabrikam"),
    ("sous chef", "Le Petit Four"),
    ("site engineer", "Contoso Build"),
    ("librarian", "the city archive"),
]
CARS = [
    ("Skoda Octavia estate", "dark blue"),
    ("Toyota Yaris hybrid", "silver"),
    ("Volvo V60", "white"),
    ("Mazda MX-5", "red"),
    ("Ford Transit camper", "beige"),
]
INSTRUMENTS = ["cello", "banjo", "saxophone", "ukulele", "harp", "accordion"]
TRIPS = [
    ("Kyoto", "April", "the temples"),
    ("Patagonia", "November", "the glaciers"),
    ("Sicily", "June", "Mount Etna"),
    ("Iceland", "February", "the northern lights"),
    ("Morocco", "October", "the Atlas mountains"),
]
DATES = ["March 3rd", "July 14th", "September 22nd", "December 9th", "May 30th", "January 17th"]
DIETS = ["vegan", "pescatarian", "gluten-free", "keto"]
PROJECTS = ["Falcon", "Bluebird", "Atlas", "Quarry", "Lantern"]
DOCTORS = ["Okafor", "Lindqvist", "Moreau", "Tanaka"]
TIMES = ["8:15", "10:40", "14:30", "16:45"]
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]
BOOKS = [
    ("The Left Hand of Darkness", "Ursula Le Guin"),
    ("Piranesi", "Susanna Clarke"),
    ("Pachinko", "Min Jin Lee"),
    ("The Remains of the Day", "Kazuo Ishiguro"),
]
KIDS = ["Leo", "Nadia", "Felix", "Amara", "Jonas"]
SCHOOLS = ["Hillcrest Primary", "the Montessori school on Elm Street", "Riverside Academy"]

# category -> (statement templates, [(style, question template)], confusers, ack)
CATEGORIES: dict[str, tuple[list[str], list[tuple[str, str]], list[str], str]] = {
    "sibling_city": (
        [
            "My sister {name} finally moved to {city} last month, she loves her new flat there.",
            "Big news in the family: {name}, my older sister, has relocated to {city} for good.",
        ],
        [
            ("entity", "Where does {name} live now?"),
            ("partial", "Which city did my sister move to?"),
            ("paraphrase", "Remind me where my sibling ended up settling down."),
        ],
        [
            "My sister phoned yesterday just to chat about nothing much.",
            "A friend from work moved flats last month and it was chaos.",
        ],
        "That's a big change for her, I hope she settles in well!",
    ),
    "pet": (
        [
            "We adopted a {color} {animal} from the shelter and named it {pet}.",
            "Meet the newest family member: a {color} {animal} we call {pet}.",
        ],
        [
            ("partial", "What's the name of our new {animal}?"),
            ("paraphrase", "What did we call the animal we got from the rescue?"),
            ("entity", "How is {pet} getting on?"),
        ],
        ["The neighbours' dog barked all night again.", "I donated some old towels to the animal shelter."],
        "How lovely, congratulations on the new arrival!",
    ),
    "allergy": (
        [
            "Heads up, I'm seriously allergic to {allergen}, please keep that in mind for recipes.",
            "Just so you know, {allergen} give me a bad allergic reaction.",
        ],
        [
            ("partial", "Which food am I allergic to?"),
            ("paraphrase", "Is there any ingredient that makes me ill?"),
            ("partial", "What should you leave out of recipes you suggest to me?"),
        ],
        ["Can you suggest a quick recipe for a weeknight dinner?", "My colleague has hay fever every spring."],
        "Noted, I'll keep that in mind.",
    ),
    "job": (
        [
            "I started a new position as a {job} at {company} this week.",
            "Guess what, {company} hired me as a {job}! First day was Monday.",
        ],
        [
            ("paraphrase", "Where am I employed these days?"),
            ("partial", "What is my new job?"),
            ("entity", "What do I do at {company}?"),
        ],
        ["My old boss sent me a new year card.", "I keep getting job spam from recruiters."],
        "Congratulations on the new role!",
    ),
    "car": (
        [
            "My old car finally died, so I bought a used {car} in {carcolor}.",
            "Picked up a second-hand {car}, {carcolor}, to replace the one that broke down.",
        ],
        [
            ("paraphrase", "What vehicle am I driving now?"),
            ("partial", "Which car did I buy?"),
            ("paraphrase", "What did I get after my automobile broke down?"),
        ],
        ["Traffic on the ring road was terrible this morning.", "The car park at the supermarket is being repaved."],
        "Nice, enjoy the new wheels!",
    ),
    "hobby": (
        [
            "On weekends I've been learning to play the {instrument} with a teacher called {teacher}.",
            "I signed up for {instrument} lessons; {teacher} teaches me every Saturday.",
        ],
        [
            ("paraphrase", "Which musical instrument am I practising?"),
            ("entity", "What does {teacher} teach me?"),
            ("partial", "What lessons do I take at the weekend?"),
        ],
        ["Do you know any good playlists for studying?", "The concert last week was too loud for me."],
        "That's a wonderful hobby to pick up.",
    ),
    "trip": (
        [
            "We booked flights to {dest} for {month}, can't wait to see {sight}.",
            "Our holiday is sorted: {dest} in {month}, mainly for {sight}.",
        ],
        [
            ("paraphrase", "Where are we travelling on vacation?"),
            ("partial", "When is our holiday?"),
            ("entity", "When are we going to {dest}?"),
        ],
        [
            "My passport expires in a couple of years, I should renew it eventually.",
            "A colleague just came back from a holiday and won't stop talking about it.",
        ],
        "Sounds like an amazing trip!",
    ),
    "birthday": (
        [
            "{friend}'s birthday is on {date}, I always forget it.",
            "Note to self: my best friend {friend} celebrates their birthday on {date}.",
        ],
        [
            ("entity", "When should I send {friend} a card?"),
            ("partial", "When is my best friend's birthday?"),
            ("paraphrase", "On what day does my closest mate turn a year older?"),
        ],
        ["I went to a birthday party at a bowling alley, it was fun.", "Cards are so expensive these days."],
        "I'll help you remember!",
    ),
    "diet": (
        ["I've gone fully {diet} since {month}, no exceptions.", "Since {month} I eat strictly {diet}."],
        [
            ("paraphrase", "What kind of eating plan am I following?"),
            ("partial", "What diet am I on?"),
            ("paraphrase", "Do I have any restrictions on what I eat?"),
        ],
        ["I had a huge lunch today, I'm stuffed.", "The new bakery downtown has great bread."],
        "Good for you, that takes commitment.",
    ),
    "project": (
        [
            "The {project} project deadline got pushed to {date} because the client changed the scope.",
            "Client moved the goalposts again, so {project} is now due on {date}.",
        ],
        [
            ("entity", "When is {project} due?"),
            ("paraphrase", "What's the new due date for the client work?"),
            ("partial", "When is the project deadline now?"),
        ],
        ["The client meeting ran an hour over.", "I need a better way to track my deadlines."],
        "Extra time never hurts.",
    ),
    "dentist": (
        [
            "My dentist appointment with Dr. {doc} is at {time} on {weekday}.",
            "Booked a check-up with Dr. {doc}, the dentist, {weekday} at {time}.",
        ],
        [
            ("partial", "What time is my dental check-up?"),
            ("entity", "When am I seeing Dr. {doc}?"),
            ("paraphrase", "When do I need to get my teeth looked at?"),
        ],
        ["I bought an electric toothbrush on sale.", "My appointment at the bank got cancelled."],
        "I'll remind you the day before.",
    ),
    "book": (
        [
            "I just finished {book} by {author} and honestly it's my favourite novel now.",
            "{book} by {author} is the best thing I've read in years.",
        ],
        [
            ("paraphrase", "Which novel did I say I loved most?"),
            ("partial", "What's my favourite book?"),
            ("paraphrase", "Who wrote the story I enjoyed so much recently?"),
        ],
        ["My book club keeps picking thrillers.", "I finished the season finale of that show last night."],
        "Great choice, that one's a classic.",
    ),
    "school": (
        ["Our son {kid} starts at {school} in September.", "{kid}, our boy, got a place at {school} from September."],
        [
            ("entity", "Which school will {kid} attend?"),
            ("paraphrase", "Where is our boy enrolling this autumn?"),
            ("partial", "Where does our son start school?"),
        ],
        ["The school run traffic is a nightmare.", "Our neighbour's son plays drums at all hours."],
        "Exciting times for him!",
    ),
}

SMALL_TALK = [
    "Good morning! How are you today?",
    "What's the weather looking like this afternoon?",
    "Can you suggest a podcast for my commute?",
    "Thanks, that's really helpful.",
    "Let me think about it.",
    "Could you summarise that in two sentences?",
    "Ha, that's funny.",
    "I'm so tired today.",
    "Any tips for staying focused in the afternoon?",
    "What's a good stretch for a stiff neck?",
    "Remind me to drink more water.",
    "Tell me a fun fact about octopuses.",
    "How long should I boil an egg for a runny yolk?",
    "What's a polite way to decline a meeting?",
    "I need a name for my fantasy football team.",
    "Is it worth learning keyboard shortcuts?",
]
ASSISTANT_SMALL = [
    "Happy to help!",
    "Sure, here's a quick idea.",
    "That makes sense.",
    "Good question, let me explain.",
    "Of course. Anything else?",
    "Here's a short summary.",
    "I hear you, rest when you can.",
]
