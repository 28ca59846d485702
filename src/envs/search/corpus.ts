// The search env's world: fictional countries, cities, companies and people, generated from a
// seed, with one encyclopedia document per entity. The facts are invented so a model cannot
// answer from memory and must retrieve; the same seed gives the same world on every machine.
//
//   Velmora Quist
//   Velmora Quist is a geologist born in Tarnhollow in 1961. Velmora Quist works at Orrin Shipping.
import { Rng } from "../random.ts";

export interface Country {
  name: string;
  capital: string;
}
export interface City {
  name: string;
  country: string;
  founded: number;
  population: number;
}
export interface Company {
  name: string;
  industry: string;
  founded: number;
  headquarters: string;
}
export interface Person {
  name: string;
  profession: string;
  born: number;
  birthplace: string;
  employer: string;
}

export interface Document {
  title: string;
  text: string;
}

export interface World {
  countries: Country[];
  cities: City[];
  companies: Company[];
  people: Person[];
  documents: Document[];
}

const ONSETS = [
  "b",
  "br",
  "c",
  "d",
  "dr",
  "f",
  "g",
  "gr",
  "h",
  "k",
  "l",
  "m",
  "n",
  "p",
  "qu",
  "r",
  "s",
  "st",
  "t",
  "th",
  "v",
  "w",
  "z",
];
const VOWELS = ["a", "e", "i", "o", "u", "ae", "ei", "ou"];
const CODAS = ["", "", "n", "r", "l", "s", "th", "m", "x"];
const CITY_SUFFIXES = ["port", "hollow", "ford", "wick", "mere", "stead", "holm", "gate"];
/** Company name suffix and the industry it implies. */
const COMPANY_KINDS: Array<[suffix: string, industry: string]> = [
  ["Shipping", "shipping"],
  ["Mining", "mining"],
  ["Labs", "software"],
  ["Textiles", "textile"],
  ["Foods", "food"],
  ["Energy", "energy"],
  ["Press", "publishing"],
  ["Glassworks", "glassmaking"],
];
const PROFESSIONS = [
  "geologist",
  "engineer",
  "painter",
  "surgeon",
  "architect",
  "botanist",
  "pilot",
  "historian",
  "chemist",
  "sculptor",
];

function capitalize(word: string): string {
  return word[0]!.toUpperCase() + word.slice(1);
}

/** Pronounceable invented names, never repeated within one world. */
class NameMaker {
  private readonly used = new Set<string>();
  constructor(private readonly rng: Rng) {}
  word(syllables: number): string {
    let word = "";
    for (let i = 0; i < syllables; i++)
      word += this.rng.pick(ONSETS) + this.rng.pick(VOWELS) + (i === syllables - 1 ? this.rng.pick(CODAS) : "");
    return capitalize(word);
  }
  unique(make: () => string): string {
    for (;;) {
      const name = make();
      if (!this.used.has(name.toLowerCase())) {
        this.used.add(name.toLowerCase());
        // Single words of multi-word names are reserved too, so "Tarn" never names both a city and a person.
        for (const part of name.toLowerCase().split(" ")) this.used.add(part);
        return name;
      }
    }
  }
}

export interface WorldSize {
  countries: number;
  cities: number;
  companies: number;
  people: number;
}

export function generateWorld(seed: number, size: WorldSize): World {
  const rng = new Rng(seed);
  const names = new NameMaker(rng);
  const countries: Country[] = [];
  const cities: City[] = [];
  for (let i = 0; i < size.countries; i++)
    countries.push({ name: names.unique(() => names.word(rng.int(2, 3)) + "ia"), capital: "" });
  for (let i = 0; i < size.cities; i++) {
    const country = countries[i % countries.length]!;
    const city = {
      name: names.unique(() => names.word(rng.int(1, 2)) + rng.pick(CITY_SUFFIXES)),
      country: country.name,
      founded: rng.int(800, 1900),
      population: rng.int(20, 3000) * 1000,
    };
    if (!country.capital) country.capital = city.name;
    cities.push(city);
  }
  const companies: Company[] = [];
  for (let i = 0; i < size.companies; i++) {
    const [suffix, industry] = rng.pick(COMPANY_KINDS);
    companies.push({
      name: names.unique(() => `${names.word(2)} ${suffix}`),
      industry,
      founded: rng.int(1850, 2015),
      headquarters: rng.pick(cities).name,
    });
  }
  const people: Person[] = [];
  for (let i = 0; i < size.people; i++) {
    people.push({
      name: names.unique(() => `${names.word(rng.int(2, 3))} ${names.word(rng.int(1, 2))}`),
      profession: rng.pick(PROFESSIONS),
      born: rng.int(1920, 2000),
      birthplace: rng.pick(cities).name,
      employer: rng.pick(companies).name,
    });
  }
  const article = (word: string) => (/^[aeiou]/.test(word) ? "an" : "a");
  const documents: Document[] = [
    ...countries.map((c) => ({ title: c.name, text: `${c.name} is a country. Its capital is ${c.capital}.` })),
    ...cities.map((c) => ({
      title: c.name,
      text: `${c.name} is a city in ${c.country}, founded in ${c.founded}. ${c.name} has a population of ${c.population}.`,
    })),
    ...companies.map((c) => ({
      title: c.name,
      text: `${c.name} is ${article(c.industry)} ${c.industry} company founded in ${c.founded}. The headquarters of ${c.name} are in ${c.headquarters}.`,
    })),
    ...people.map((p) => ({
      title: p.name,
      text: `${p.name} is ${article(p.profession)} ${p.profession} born in ${p.birthplace} in ${p.born}. ${p.name} works at ${p.employer}.`,
    })),
  ];
  return { countries, cities, companies, people, documents };
}
