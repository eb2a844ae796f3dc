"""Hand-written facts for knowledge_recall_at_5_by_meaning (bench/knowledge_bench.py): each a
short passage on an everyday topic of its own, and a question about it asked in other words.

A question shares no rare word with its passage (no name, no number, none of the passage's own
terms for its topic: "cactus" asks about succulents, "trainers" about running shoes), only
everyday words at most; the full-text index does not stem, so "watering" is not "water". The
questions were written with the passages, before any was searched, and not changed after.
"""

from __future__ import annotations

# (passage, question)
FACTS: list[tuple[str, str]] = [
    ("Succulents store moisture in their thick fleshy leaves, so they need watering only every "
     "two weeks in summer and about once a month in winter; soggy compost rots them.",
     "How often should I give my cactus a drink?"),
    ("A bicycle chain that skips under load is usually stretched: measure twelve links with a "
     "ruler, and if they span more than twelve and a sixteenth inches, fit a new chain before "
     "it wears out the cassette and chainrings.",
     "My bike's gears slip when I pedal hard uphill. What part has worn?"),
    ("Sourdough is ready to bake when it has risen by about half and a floured fingertip "
     "pressed into it leaves a dent that springs back slowly; if the dent fills at once, let it "
     "prove longer.",
     "How can I tell that my loaf has finished rising before it goes in the oven?"),
    ("Self-employed earners must file the annual return by the thirty-first of January and pay "
     "any balance then; filing late costs a fixed penalty of one hundred pounds even when "
     "nothing is owed.",
     "What happens if a freelancer submits their yearly paperwork to the revenue office too "
     "late?"),
    ("Pinch out the side shoots that sprout between the main stem and each leaf of cordon "
     "tomatoes, so the plant puts its energy into fruit instead of foliage.",
     "Should I remove the little extra growths in the joints of my vine crop?"),
    ("To descale a kettle, fill it halfway with equal parts white vinegar and water, bring it "
     "to the boil, leave it for an hour, then rinse twice: the acid dissolves the deposits.",
     "How do I get rid of the chalky crust inside the thing I heat up for tea?"),
    ("Puppies have their first vaccinations at eight weeks and a booster at twelve weeks, and "
     "should stay off public pavements until a week after the second injection.",
     "When is it safe to take a young dog for walks outside?"),
    ("Tyre tread must be at least 1.6 millimetres deep across the central three-quarters; the "
     "outer band of a twenty-pence coin disappears into the grooves of a legal tyre.",
     "How can I check with loose change whether my car wheels are too bald?"),
    ("Adults sleep better when the bedroom is cool, around eighteen degrees, dark, and free of "
     "screens for the hour before lights out.",
     "What temperature should the room where I rest at night be kept at?"),
    ("Wash woollen jumpers by hand in lukewarm water with a little wool detergent, never wring "
     "them, and dry them flat on a towel so they keep their shape.",
     "How should I clean a knitted sweater without it shrinking or stretching?"),
    ("Basil hates the cold: keep the pot on a sunny windowsill above fifteen degrees and pick "
     "the top leaves first so it grows bushy instead of flowering.",
     "How do I keep my pesto herb full and leafy indoors?"),
    ("Running shoes lose most of their cushioning after about five hundred miles; when the "
     "midsole shows creases and your knees ache after a jog, it is time for a new pair.",
     "When should I buy new trainers for my morning exercise?"),
    ("For fluffy long-grain rice, rinse it until the water runs clear, use one and a half cups "
     "of water per cup, simmer covered for twelve minutes and let it rest off the heat.",
     "How do I stop my grains turning sticky and gluey when I cook them on the stove?"),
    ("Test smoke alarms once a month by holding the button until it sounds, and replace the "
     "whole unit every ten years, as the sensor weakens with age.",
     "How long does a fire detector on the ceiling last before I need another one?"),
    ("Lithium batteries in laptops age fastest when kept full and warm; keeping the charge "
     "between twenty and eighty percent roughly doubles their useful life.",
     "How can I make my notebook computer's power cell last more years?"),
    ("Orchids are best soaked in their pot for ten minutes once a week and left to drain "
     "fully; their roots need air and turn mushy when left standing in water.",
     "What is the right routine for hydrating the tropical flower that grows in bark?"),
    ("Before painting a wall, wash it with sugar soap, fill cracks, sand it smooth and apply a "
     "coat of primer; emulsion over grease peels within months.",
     "What preparation does a room need before I put a new colour on it?"),
    ("A passport renewal takes about three weeks when applied for online; the old one is sent "
     "with the form, cancelled, and returned separately.",
     "How long will it take to get my travel document replaced?"),
    ("Cool a burn under cold running water for twenty minutes, remove rings and watches "
     "nearby, then cover it loosely with cling film; never use butter or ice.",
     "What should I do right away after scalding my hand on a hot pan?"),
    ("A compost heap needs roughly two parts brown material, such as dry leaves and "
     "cardboard, to one part green kitchen scraps; turn it monthly to let air in and stop it "
     "smelling.",
     "My garden waste pile stinks. What mix of ingredients should it have?"),
    ("In chess, castling is allowed only if neither the king nor the rook has moved, the "
     "squares between them are empty, and the king does not pass through check.",
     "When am I permitted to do the special move that swaps my monarch with the tower?"),
    ("Green tea turns bitter in boiling water; brew it at about eighty degrees for two "
     "minutes, and black tea at a full boil for four.",
     "At what heat should I steep sencha so it isn't astringent?"),
    ("If a radiator is cold at the top but warm at the bottom, air is trapped: turn the "
     "heating off, open the bleed valve with a key until water dribbles out, then close it.",
     "Why is the upper part of my heater panel staying chilly?"),
    ("Guitar strings sound dull after a few months as sweat and dirt build up; wiping them "
     "after each session and changing them every three months keeps them bright.",
     "How frequently should I restring my acoustic instrument?"),
    ("Cooked food should be cooled and frozen within two hours, and once defrosted in the "
     "fridge it keeps a day but must not be frozen again unless it is cooked first.",
     "Is it okay to put leftovers back in the freezer after they thawed?"),
    ("A ladder stands at a safe angle when its base is one metre out from the wall for every "
     "four metres of height; keep three points of contact while climbing.",
     "How far from the house should the feet of my steps go before I go up?"),
    ("Sunscreen should be applied twenty minutes before going outside, about a teaspoon for "
     "the face and neck, and again every two hours or after swimming.",
     "How often do I need to put more SPF lotion on at the beach?"),
    ("Pollen counts peak in the early morning and the evening; keeping windows shut then and "
     "showering after being outdoors eases hay fever.",
     "At what times of day do people with spring allergies suffer most?"),
    ("Repot a houseplant when roots circle the bottom of the container or poke out of the "
     "drainage holes, moving it in spring to a pot only one size bigger.",
     "How do I know my indoor greenery has outgrown where it lives?"),
    ("Hold a kitchen knife at fifteen to twenty degrees against the whetstone, soak the stone "
     "first, and draw each side across it the same number of strokes.",
     "What angle should a chef's blade be held at when honing it on a wet block?"),
    ("For a soft-boiled egg with a runny yolk, lower it into boiling water for six minutes, "
     "then into cold water; ten minutes gives a firm yolk.",
     "How long do I simmer something in its shell so the yellow part stays gooey?"),
    ("To recover from jet lag after flying east, get daylight in the morning at your "
     "destination and avoid naps longer than twenty minutes; the body clock shifts about an "
     "hour a day.",
     "How do I adjust faster to a new time zone after a long flight?"),
    ("Black mould on bathroom ceilings grows where steam condenses; run the extractor fan for "
     "twenty minutes after a shower and wipe spots with diluted bleach.",
     "What stops dark fungus patches appearing above the tub?"),
    ("A piano should be tuned twice a year, as seasonal changes in humidity swell and shrink "
     "the soundboard and pull the strings out of pitch.",
     "How many times annually does an upright with hammers need adjusting, and why?"),
    ("Mow grass no shorter than about four centimetres in summer and never remove more than a "
     "third of the blade at once; longer grass shades its roots and survives drought.",
     "How low should I cut my lawn during hot dry weather?"),
    ("Paying every bill on time and using less than a third of your available credit limit "
     "are the two habits that raise a credit score most.",
     "What helps a borrower's rating improve with lenders?"),
    ("Cats need one litter tray each plus one extra, placed away from their food bowls and "
     "scooped daily; a dirty tray is the commonest reason they soil elsewhere.",
     "Why is my kitty peeing outside its box?"),
    ("Trim a candle's wick to about five millimetres before each lighting and burn it until "
     "the wax pool reaches the edge, or it will tunnel down the middle.",
     "Why is a hole forming down the centre of my scented jar light?"),
    ("When lifting a heavy box, bend at the knees and hips, keep the load close to your body "
     "and avoid twisting; the legs, not the lower back, should do the work.",
     "What posture protects my spine when I pick up something weighty from the floor?"),
    ("A home router works best placed high up in the middle of the house, away from microwaves "
     "and thick walls, which absorb and scatter its signal.",
     "Where should I put the internet box so the wireless reaches every room?"),
    ("Remove a bee sting by scraping it sideways with a card rather than pinching it, which "
     "squeezes more venom in; then wash the spot and apply a cold pack.",
     "What's the best way to get an insect's barb out of my skin after it stung me?"),
    ("Season a cast-iron pan by rubbing a thin layer of oil over it and baking it upside down "
     "for an hour at two hundred and twenty degrees; never soak it.",
     "How do I make my heavy black skillet non-stick and keep it from rusting?"),
    ("In the three weeks before a marathon, reduce weekly mileage step by step to let the legs "
     "recover, while keeping a few short fast sessions.",
     "Should I train less in the final days before a long road race?"),
    ("Monthly contact lenses must be cleaned in fresh solution each night, never tap water, "
     "and their case replaced every three months to avoid eye infections.",
     "How do I look after the vision discs I put in each morning?"),
    ("A new aquarium needs four to six weeks of cycling, letting bacteria build up that turn "
     "ammonia into nitrate, before any fish are added.",
     "How long must I wait before putting pets into a freshly set up tank?"),
    ("Overpaying a mortgage by even a small amount each month shortens the term and cuts the "
     "total interest, but lenders often cap overpayments at ten percent a year.",
     "Is paying extra on my home loan worthwhile?"),
    ("Protect tender shrubs from frost by wrapping them in horticultural fleece overnight and "
     "moving pots against a south-facing wall.",
     "How do I keep delicate garden bushes alive on freezing nights?"),
    ("Cook pasta in plenty of well-salted water, about a litre per hundred grams, and save a "
     "cup of the starchy water to loosen the sauce.",
     "What's the trick for getting a glossy coating on my spaghetti?"),
    ("Hearing is damaged by sound above eighty-five decibels over long periods; keep earphone "
     "volume under sixty percent and take a break every hour.",
     "How loud can I play music in my earbuds without harming my ears?"),
    ("Tell your energy supplier, council and bank at least two weeks before moving home, and "
     "take meter readings on the day you leave.",
     "Who do I need to notify when I relocate to a new address?"),
    ("To find a puncture, pump up the inner tube and pass it through a bowl of water; bubbles "
     "show the hole, which you roughen, glue and patch.",
     "How do I locate the leak in my flat cycle wheel?"),
    ("Polish leather shoes by brushing off dirt, rubbing in wax polish in small circles, "
     "leaving it ten minutes and buffing with a soft cloth.",
     "How do I get my smart brown boots shiny?"),
    ("Clean windows on an overcast day, as sunshine dries the solution into streaks; a "
     "squeegee and a drop of washing-up liquid in warm water work best.",
     "Why does my glass end up smeary after I wipe it on bright afternoons?"),
    ("Seedlings grown indoors must be hardened off for a week or two before planting out, set "
     "outside for a few more hours each day so they adapt to wind and sun.",
     "How do I get young plants raised on the sill used to the garden?"),
    ("A fridge should run between three and five degrees, with raw meat on the bottom shelf "
     "so its juices cannot drip onto ready-to-eat food.",
     "Where should uncooked chicken go in the refrigerator, and how chilly should it be?"),
    ("Brush teeth for two minutes twice a day with fluoride toothpaste, and spit rather than "
     "rinse afterwards so the fluoride stays on the enamel.",
     "Should I wash my mouth out after cleaning my molars?"),
    ("Soak pasted wallpaper for the time printed on the roll, hang the first strip against a "
     "plumb line rather than a corner, and smooth bubbles outward with a brush.",
     "How do I get the first length of decorative paper straight?"),
    ("Garden birds need their feeders cleaned every two weeks, as mouldy seed spreads disease; "
     "hang them near cover but out of reach of pouncing cats.",
     "How often should I wash the thing I put out grain in for robins?"),
    ("If a phone falls into water, switch it off at once, do not charge it, and let it dry for "
     "at least a day; rice does no better than open air.",
     "My mobile got dropped in the sink. What now?"),
    ("Jam has reached its setting point when a drop on a chilled saucer wrinkles as you push "
     "it with a finger; boiling beyond that darkens it.",
     "How can I test whether my fruit preserve will firm up?"),
]
